// Listing keys and breaking leases (driver.Lister, driver.Breaker); a
// break's tombstones.

package zklease

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

var (
	_ driver.Lister  = (*Store)(nil)
	_ driver.Breaker = (*Store)(nil)
)

// tombPrefix starts a tombstone's name, "_b_<token>-<until>": a persistent
// node that says Break evicted the token's hold, which would have expired at
// until (the leader's time, ms).
const tombPrefix = "_b_"

// List implements driver.Lister: the root's children, read once when a
// listing starts (cursor "") and kept for its pages, sorted; a page reads
// each key's nodes. The cursor is the last key node read. A write to the
// root first tells the server's time, and the reads after it see every
// write completed before the page.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	if _, err := s.usable(ctx); err != nil {
		return nil, "", err
	}
	st, err := s.conn.Set(s.root, nil, -1)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, "", nil
	}
	s.mu.Lock()
	names := s.keys
	s.mu.Unlock()
	if err == nil && (cursor == "" || names == nil) {
		if names, _, err = s.conn.Children(s.root); err == nil {
			slices.Sort(names)
			s.mu.Lock()
			s.keys = names
			s.mu.Unlock()
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("zklease: list %s: %w", s.root, err)
	}
	i, found := slices.BinarySearch(names, cursor)
	if found {
		i++
	}
	var page []driver.Entry
	for n := 0; i < len(names); i++ {
		key, err := url.PathUnescape(names[i])
		if err != nil || escapeKey(key) != names[i] || !strings.HasPrefix(key, prefix) {
			continue
		}
		if n == max(limit, 1) {
			return page, names[i-1], nil
		}
		n++
		v, err := s.look(key, st.Mtime)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return nil, "", wrapped(err, "list", key)
		}
		for _, p := range v.stale {
			_ = s.dropped(p, -1, nil) // else the next List or Break
		}
		if len(v.Holders)+len(v.Waiters)+len(v.Broken) > 0 {
			page = append(page, v.Entry)
		}
	}
	return page, "", nil
}

// view is a key as look read it.
type view struct {
	driver.Entry
	held  []entry  // the live holders' nodes, as read
	stale []string // the expired tombstones
}

// look reads key's nodes and tombstones and judges them at the server's
// time now (ms), as Inspect does. A node gone since the listing is left out
// before the holders are told: the next ones hold.
func (s *Store) look(key string, now int64) (view, error) {
	v := view{Entry: driver.Entry{Key: key}}
	parent := s.parent(key)
	children, _, err := s.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return v, nil
	} else if err != nil {
		return v, fmt.Errorf("list %s: %w", parent, err)
	}
	for _, c := range children {
		t, ok := strings.CutPrefix(c, tombPrefix)
		i := strings.LastIndexByte(t, '-')
		until, err := strconv.ParseInt(t[i+1:], 10, 64)
		if ok && i >= 0 && err == nil && until > now {
			v.Broken = append(v.Broken, t[:i])
		} else if ok && i >= 0 && err == nil {
			v.stale = append(v.stale, parent+"/"+c)
		}
	}
	var live []node
	var ents []entry
	for _, n := range parseNodes(parent, children) {
		e, err := s.read(key, n.path, false)
		if errors.Is(err, lease.ErrNotHeld) {
			continue
		} else if err != nil {
			return v, err
		}
		live, ents = append(live, n), append(ents, e)
	}
	h := lead(live)
	for i, e := range ents {
		left := min(e.mtime+e.ttlMs-now, e.ttlMs)
		rem := time.Duration(left) * time.Millisecond
		switch {
		case left <= 0: // expired: holds nothing, waits for nothing
		case i < h:
			v.Holders = append(v.Holders, driver.Holder{Token: live[i].token, Holder: e.holder, Fence: e.fence(), Remaining: rem, Shared: live[i].shared})
			v.held = append(v.held, e)
		default:
			v.Waiters = append(v.Waiters, driver.Waiter{Token: live[i].token, Shared: live[i].shared, Remaining: rem})
		}
	}
	return v, nil
}

// Break implements driver.Breaker: one multi deletes the live holders'
// nodes, each at the version read (else it looks again), creates a
// tombstone per evicted token that lives until its hold would have expired,
// and deletes the expired tombstones. The deletions fire the waiters'
// watches, as a release does; the next node's czxid, a fence, is larger.
func (s *Store) Break(ctx context.Context, key string) (driver.Entry, error) {
	parent := s.parent(key)
	for range maxRounds {
		if _, err := s.usable(ctx); err != nil {
			return driver.Entry{}, err
		}
		st, err := s.conn.Set(parent, nil, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return driver.Entry{Key: key}, nil
		} else if err != nil {
			return driver.Entry{}, wrapped(fmt.Errorf("write %s: %w", parent, err), "break", key)
		}
		v, err := s.look(key, st.Mtime)
		if err != nil {
			return driver.Entry{}, wrapped(err, "break", key)
		}
		var ops []any
		for _, p := range v.stale {
			ops = append(ops, &zk.DeleteRequest{Path: p, Version: -1})
		}
		for i, e := range v.held {
			name := fmt.Sprintf("%s/%s%s-%d", parent, tombPrefix, v.Holders[i].Token, e.mtime+e.ttlMs)
			ops = append(ops, &zk.DeleteRequest{Path: e.path, Version: e.version},
				&zk.CreateRequest{Path: name, Acl: s.acl, Flags: zk.FlagPersistent})
		}
		if len(ops) > 0 {
			_, err = s.conn.Multi(ops...)
		}
		if err == nil {
			return v.Entry, nil
		} else if !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return driver.Entry{}, wrapped(fmt.Errorf("delete the holders under %s: %w", parent, err), "break", key)
		}
	}
	return driver.Entry{}, wrapped(fmt.Errorf("the nodes of %s kept changing for %d rounds", parent, maxRounds), "break", key)
}

// broken returns an error matching lease.ErrBroken if a tombstone of token
// lives under key's node, else err, which says the token's node is gone.
func (s *Store) broken(key, token string, err error) error {
	children, _, _ := s.conn.Children(s.parent(key))
	for _, c := range children {
		if strings.HasPrefix(c, tombPrefix+token+"-") {
			return fmt.Errorf("the hold was broken: %w", lease.ErrBroken)
		}
	}
	return err
}
