// AcquireMany and ReleaseMany: the creates and the deletes of many keys in
// one multi each.

package zklease

import (
	"context"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease/driver"
)

// maxBatch bounds the requests of one AcquireMany or ReleaseMany call (see
// Caps). A request's create and touch take at most about 6.5 KB (two paths
// of a 512-byte key escaped to 1,536, and a holder name escaped in the
// node's data), so a multi of this many stays under jute.maxbuffer (1 MiB
// by default) with a wide margin.
const maxBatch = 64

// AcquireMany implements driver.BatchAcquirer. The nodes of the requests
// that have no entry yet are created in one multi (createNodes, which
// creates missing parents); a node that is its key's only child then holds
// the key, with no other request. Every other request goes on as Acquire
// does, one by one: a node with others beside it from its key's listing, a
// retried or queued token from its entry, all of them if the multi failed
// (nothing was written, or a lost connection left it unknown, which
// Acquire's listing settles: it keeps the token's oldest node).
func (s *Store) AcquireMany(ctx context.Context, rs []driver.Request) ([]driver.Grant, []error) {
	gs, errs := make([]driver.Grant, len(rs)), make([]error, len(rs))
	made, lost := s.createMany(ctx, rs)
	for i, r := range rs {
		m, ok := made[i]
		switch {
		case !ok:
			gs[i], errs[i] = s.Acquire(ctx, r)
			continue
		case m.alone:
			gs[i] = s.hold(r, m.e, m.e.mtime)
		default:
			gs[i], errs[i] = s.settle(ctx, r, m.e, m.e.mtime)
		}
		if errs[i] == nil {
			gs[i].Lost = lost
		} else {
			errs[i] = acquireErr(r, errs[i])
		}
	}
	return gs, errs
}

// madeNode is a node that createMany made for a request.
type madeNode struct {
	e     entry
	alone bool // the key's only child: it holds the key
}

// createMany creates, in one multi, the nodes of the requests of rs that
// have no entry, if there are two or more, and returns them by index in rs
// and the session's Lost channel (see usable). It returns none if it sent
// nothing or the multi failed: Acquire then takes each request, and says
// why if it fails too.
func (s *Store) createMany(ctx context.Context, rs []driver.Request) (map[int]madeNode, <-chan struct{}) {
	lost, err := s.usable(ctx)
	if err != nil {
		return nil, nil
	}
	var at []int
	var fresh []driver.Request
	for i, r := range rs {
		if _, ok := s.remembered(r); !ok {
			at, fresh = append(at, i), append(fresh, r)
		}
	}
	if len(at) < 2 {
		return nil, nil // Acquire alone costs the same
	}
	es, alone, err := s.createNodes(fresh)
	if err != nil {
		return nil, nil
	}
	made := make(map[int]madeNode, len(at))
	for j, i := range at {
		made[i] = madeNode{e: es[j], alone: alone[j]}
	}
	return made, lost
}

// ReleaseMany implements driver.BatchReleaser: the nodes of the requests
// this Store holds are deleted in one multi, if there are two or more.
// Every other request, and all of them if the multi failed (a node already
// gone fails it as a whole), is released as Release does, one by one.
func (s *Store) ReleaseMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	done := make([]bool, len(rs))
	if _, err := s.usable(ctx); err == nil {
		var at []int
		var ops []any
		for i, r := range rs {
			if e, ok := s.remembered(r); ok && e.held {
				at, ops = append(at, i), append(ops, &zk.DeleteRequest{Path: e.path, Version: -1})
			}
		}
		if len(at) >= 2 {
			if _, err := s.conn.Multi(ops...); err == nil {
				for _, i := range at {
					s.entries.Delete(rs[i].Token)
					done[i] = true
				}
			}
		}
	}
	for i, r := range rs {
		if !done[i] {
			errs[i] = s.Release(ctx, r)
		}
	}
	return errs
}
