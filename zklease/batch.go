// AcquireMany and ReleaseMany: the creates and the deletes of many keys in
// one multi each.

package zklease

import (
	"context"
	"errors"
	"fmt"

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
// that have no entry yet are created in one multi, with their keys'
// parents written (see createOps); a node that is its key's only child then
// holds the key, with no other request. A missing parent fails the multi
// as a whole: the parents are created and the multi sent again. Every other
// request goes on as Acquire does, one by one: a node with others beside it
// from its key's listing, a retried or queued token from its entry, all of
// them if the multi failed otherwise (nothing was written, or a lost
// connection left it unknown, which Acquire's listing settles: it keeps the
// token's oldest node).
func (s *Store) AcquireMany(ctx context.Context, rs []driver.Request) ([]driver.Grant, []error) {
	gs, errs := make([]driver.Grant, len(rs)), make([]error, len(rs))
	made, err := s.createMany(ctx, rs)
	for i, r := range rs {
		m, ok := made[i]
		switch {
		case !ok || err != nil:
			gs[i], errs[i] = s.Acquire(ctx, r)
			continue
		case m.alone:
			gs[i] = s.hold(r, m.e, m.e.mtime)
		default:
			gs[i], errs[i] = s.settle(ctx, r, m.e, m.e.mtime)
		}
		if errs[i] == nil {
			gs[i].Lost = m.lost
		} else {
			errs[i] = acquireErr(r, errs[i])
		}
	}
	return gs, errs
}

// madeNode is a node that createMany made for a request.
type madeNode struct {
	e     entry
	alone bool            // the key's only child: it holds the key
	lost  <-chan struct{} // the session's end (see usable)
}

// createMany creates, in one multi, the nodes of the requests of rs that
// have no entry, if there are two or more, and returns them by index in rs.
// A missing parent fails the multi: the parents from the failed op on are
// created, and the multi sent once more.
func (s *Store) createMany(ctx context.Context, rs []driver.Request) (map[int]madeNode, error) {
	lost, err := s.usable(ctx)
	if err != nil {
		return nil, err
	}
	var at []int
	var ops []any
	for i, r := range rs {
		if _, ok := s.remembered(r); !ok {
			create, touch := s.createOps(r)
			at, ops = append(at, i), append(ops, create, touch)
		}
	}
	if len(at) < 2 {
		return nil, nil // Acquire alone costs the same
	}
	res, err := s.conn.Multi(ops...)
	if k := failedOp(res); errors.Is(err, zk.ErrNoNode) && k >= 0 {
		// The parent of pair k/2 is missing, and those after it may be:
		// creating them all costs a request each, but sending the multi
		// again for each would make the server redo the pairs before.
		err = nil
		for j := k / 2; j < len(at) && err == nil; j++ {
			err = s.ensureParent(ops[2*j+1].(*zk.SetDataRequest).Path)
		}
		if err == nil {
			res, err = s.conn.Multi(ops...)
		}
	}
	if err == nil && len(res) != len(ops) {
		err = errors.New("unexpected multi response")
	}
	if err != nil {
		return nil, fmt.Errorf("create %d nodes: %w", len(at), err)
	}
	made := make(map[int]madeNode, len(at))
	for j, i := range at {
		e, alone, err := created(rs[i], res[2*j], res[2*j+1])
		if err != nil {
			return nil, err
		}
		made[i] = madeNode{e: e, alone: alone, lost: lost}
	}
	return made, nil
}

// failedOp returns the index of the op that failed a multi, or -1: the
// first with an error (the ops after it have one too, "runtime
// inconsistency"; those before it none).
func failedOp(res []zk.MultiResponse) int {
	for k, r := range res {
		if r.Error != nil {
			return k
		}
	}
	return -1
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
