// Shared holds of the TableStore beyond the leasetest Shared subtests:
// mixed renewals, racing readers and writers, fenced writes of a reader,
// and tables made before shared holds.

package pglease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/pglease"
)

// asReader returns r as a shared (reader's) request.
func asReader(r driver.Request) driver.Request { r.Shared = true; return r }

// TestSharedRenewManyMixed: one RenewMany renews a writer and two readers
// of one key, and refuses an expired reader, a released one and a reader's
// request for a key a writer holds.
func TestSharedRenewManyMixed(t *testing.T) {
	const long = 30 * time.Second
	ctx := testCtx(t, 60*time.Second)
	s := newStore(t, sharedPool(t), pglease.ModeTable)
	w := req("a", "w", long)
	r1, r2, gone := asReader(req("b", "r1", time.Second)), asReader(req("b", "r2", time.Second)), asReader(req("b", "gone", long))
	brief := asReader(req("c", "brief", 100*time.Millisecond))
	for _, r := range []driver.Request{w, r1, r2, gone, brief} {
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatalf("Acquire for %s: %v", r.Holder, err)
		}
	}
	if err := s.Release(ctx, gone); err != nil {
		t.Fatalf("Release of a reader: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // brief expires
	r1.TTL, r2.TTL = long, long
	stranger := asReader(req("a", "stranger", long))
	errs := s.RenewMany(ctx, []driver.Request{r1, stranger, w, brief, r2, gone})
	for i, want := range []bool{true, false, true, false, true, false} {
		if ok := errs[i] == nil; ok != want || !ok && !errors.Is(errs[i], lease.ErrNotHeld) {
			t.Errorf("RenewMany[%d] = %v, want renewed %v (else ErrNotHeld)", i, errs[i], want)
		}
	}
	info, err := s.Inspect(ctx, "b")
	if err != nil || !info.Shared || info.Readers != 2 || info.Remaining < long-10*time.Second {
		t.Fatalf("Inspect of the renewed readers = %+v, %v; want 2 readers with about %v left", info, err, long)
	}
	if info, err := s.Inspect(ctx, "c"); err != nil || info.Held {
		t.Fatalf("Inspect of an expired reader's key = %+v, %v; want free", info, err)
	}
}

// TestSharedRace: readers and a writer that ask for a free key at once
// never hold it together, and the readers granted share one fence.
func TestSharedRace(t *testing.T) {
	const readers, rounds = 6, 10
	ctx := testCtx(t, 2*time.Minute)
	s := newStore(t, sharedPool(t), pglease.ModeTable)
	for round := range rounds {
		key := "race-" + randHex(4)
		var mu sync.Mutex
		fences := make(map[uint64]int)
		var wrote bool
		var wg sync.WaitGroup
		for i := range readers + 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := req(key, "c", 30*time.Second)
				r.Shared = i > 0
				g, err := s.Acquire(ctx, r)
				var he *lease.HeldError
				if err != nil && !errors.As(err, &he) {
					t.Errorf("Acquire: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				if err == nil && r.Shared {
					fences[g.Fence]++
				} else if err == nil {
					wrote = true
				}
			}()
		}
		wg.Wait()
		info, err := s.Inspect(ctx, key)
		switch {
		case err != nil:
			t.Fatalf("Inspect: %v", err)
		case wrote && len(fences) > 0:
			t.Fatalf("round %d: the writer and readers (fences %v) hold together", round, fences)
		case !wrote && (len(fences) != 1 || info.Readers != fences[info.Fence]):
			t.Fatalf("round %d: readers' fences %v, Inspect %+v; want one fence, every reader counted", round, fences, info)
		}
	}
}

// TestSharedFencedTx: a reader writes fenced while it reads, not after it
// left; the empty token never passes for the readers.
func TestSharedFencedTx(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	s := newStore(t, sharedPool(t), pglease.ModeTable)
	r := asReader(req("k", "r", 30*time.Second))
	g, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	write := func(l leaseRef) error {
		return s.FencedTx(ctx, l, func(ctx context.Context, tx pgx.Tx) error { return nil })
	}
	if err := write(leaseRef{"k", r.Token, g.Fence}); err != nil {
		t.Fatalf("FencedTx of a reader: %v", err)
	}
	if err := write(leaseRef{"k", "", g.Fence}); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("FencedTx of the empty token = %v, want ErrNotHeld", err)
	}
	empty := asReader(driver.Request{Key: "k", TTL: time.Hour})
	if _, err := s.Acquire(ctx, empty); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Acquire for the empty token = %v, want ErrInvalid", err)
	}
	empty.Shared = false
	if err := s.Renew(ctx, empty); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Renew of the empty token = %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, empty); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release of the empty token = %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := write(leaseRef{"k", r.Token, g.Fence}); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("FencedTx of a reader that left = %v, want ErrNotHeld", err)
	}
}

// leaseRef is a pglease.LeaseRef.
type leaseRef struct {
	key, token string
	fence      uint64
}

func (r leaseRef) Key() string   { return r.key }
func (r leaseRef) Token() string { return r.token }
func (r leaseRef) Fence() uint64 { return r.fence }

// TestMigrateBeforeShared: Migrate adds the columns of shared holds and
// tombstones, and the index of List, to tables made before them, keeping
// their rows and fences.
func TestMigrateBeforeShared(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	s := newStore(t, pool, pglease.ModeTable, pglease.WithTable("lk_before_shared_"+randHex(4)))
	dropTables(t, pool, s)
	if _, err := pool.Exec(ctx, `CREATE TABLE `+s.Table()+` (ns text NOT NULL, key text NOT NULL, token text,
		holder text NOT NULL DEFAULT '', fence bigint NOT NULL, expires_at timestamptz, pid integer, PRIMARY KEY (ns, key));
	CREATE TABLE `+s.QueueTable()+` (ns text NOT NULL, key text NOT NULL, token text NOT NULL, seq bigserial NOT NULL,
		expires_at timestamptz NOT NULL, PRIMARY KEY (ns, key, token))`); err != nil {
		t.Fatalf("the tables of before: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+s.Table()+` (ns, key, fence) VALUES ($1, 'k', 7)`, s.Namespace()); err != nil {
		t.Fatalf("a row of before: %v", err)
	}
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	if g, err := s.Acquire(ctx, asReader(req("k", "r", time.Minute))); err != nil || g.Fence != 8 {
		t.Fatalf("shared Acquire after Migrate: fence %d, %v; want 8", g.Fence, err)
	}
	if e, err := s.Break(ctx, "k"); err != nil || len(e.Holders) != 1 {
		t.Fatalf("Break after Migrate = %+v, %v; want the reader evicted", e, err)
	}
	var indexes int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_index WHERE indrelid = $1::regclass`, s.Table()).Scan(&indexes); err != nil || indexes != 2 {
		t.Fatalf("the lease table has %d indexes (%v), want its key and List's", indexes, err)
	}
}

// TestSharedLateCommit: requests that took their snapshot while the key was
// free, and then waited for its row, see the hold committed meanwhile:
// readers do not join a writer, a writer does not take the readers' key.
func TestSharedLateCommit(t *testing.T) {
	pool := sharedPool(t)
	for _, tc := range []struct {
		name, set string
		shared    bool // the requests that wait
	}{
		{"readers after a writer", `token = 'w', holder = 'w'`, true},
		{"writer after a reader", `token = '', holder = 'r', readers = jsonb_build_object('r', jsonb_build_array(
			(extract(epoch FROM clock_timestamp() + interval '30 seconds') * 1000000)::int8, 'r'))`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			table := pglease.WithTable("lk_late_commit_" + randHex(4)) // named by the waiting statements only
			migrate(t, pool, table)
			s := newStore(t, pool, pglease.ModeTable, table)
			dropTables(t, pool, s)
			key := "late-" + randHex(4)
			r := req(key, "first", time.Second)
			if _, err := s.Acquire(ctx, r); err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if err := s.Release(ctx, r); err != nil {
				t.Fatalf("Release: %v", err)
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			var pid int32
			if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM `+s.Table()+` WHERE ns = $1 AND key = $2 FOR UPDATE`,
				s.Namespace(), key).Scan(&pid); err != nil {
				t.Fatalf("lock the row: %v", err)
			}
			const n = 3
			errs := make(chan error, n)
			for range n {
				go func() {
					w := req(key, "late", 30*time.Second)
					w.Shared = tc.shared
					_, err := s.Acquire(ctx, w)
					errs <- err
				}()
			}
			for waiting := 0; waiting < n; time.Sleep(10 * time.Millisecond) {
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE pid <> $1 AND wait_event_type = 'Lock' AND strpos(query, $2) > 0`, pid, s.Table()).Scan(&waiting); err != nil {
					t.Fatalf("count the waiting requests: %v", err)
				}
			}
			if _, err := tx.Exec(ctx, `UPDATE `+s.Table()+` SET `+tc.set+`, fence = fence + 1,
				expires_at = clock_timestamp() + interval '30 seconds' WHERE ns = $1 AND key = $2`, s.Namespace(), key); err != nil {
				t.Fatalf("hold the key: %v", err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
			for range n {
				var he *lease.HeldError
				if err := <-errs; !errors.As(err, &he) {
					t.Errorf("a request that waited for the row = %v, want a *lease.HeldError", err)
				}
			}
		})
	}
}

// TestSharedWriterLeaves: a waiting writer that gives up while readers hold
// announces the key, naming nobody: the reader queued behind it may join.
func TestSharedWriterLeaves(t *testing.T) {
	const ttl = 30 * time.Second
	ctx := testCtx(t, 30*time.Second)
	s := newStore(t, sharedPool(t), pglease.ModeTable)
	sub := subscribe(t, ctx, s)
	r1, w, r2 := asReader(req("k", "r1", ttl)), req("k", "w", ttl), asReader(req("k", "r2", ttl))
	w.Queue, r2.Queue = true, true
	if _, err := s.Acquire(ctx, r1); err != nil {
		t.Fatalf("Acquire of r1: %v", err)
	}
	for _, r := range []driver.Request{w, r2} {
		var he *lease.HeldError
		if _, err := s.Acquire(ctx, r); !errors.As(err, &he) {
			t.Fatalf("queued Acquire of %s = %v, want a *lease.HeldError", r.Holder, err)
		}
	}
	if err := s.Release(ctx, w); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the waiting writer's Release = %v, want ErrNotHeld", err)
	}
	a, err := nextAnnouncement(t, ctx, sub, 10*time.Second)
	if err != nil || a.Key != "k" || a.Next != "" {
		t.Fatalf("announcement after the writer left = %+v, %v; want k, naming nobody", a, err)
	}
	if g, err := s.Acquire(ctx, r2); err != nil {
		t.Fatalf("Acquire of r2 after the writer left: %v", err)
	} else if info, _ := s.Inspect(ctx, "k"); info.Readers != 2 || info.Fence != g.Fence {
		t.Fatalf("Inspect = %+v, want 2 readers of fence %d", info, g.Fence)
	}
}

// TestSharedRenewOrder: clients renewing readers of the same keys at once,
// each in its own order and with its own set of keys, never deadlock.
func TestSharedRenewOrder(t *testing.T) {
	const ttl, rounds = 30 * time.Second, 30
	pool := sharedPool(t)
	ctx := testCtx(t, 2*time.Minute)
	ns := namespace(t)
	var sets [][]driver.Request
	for c, n := range []int{7, 150, 40} {
		s := storeNS(t, pool, pglease.ModeTable, ns)
		var rs []driver.Request
		for i := range n {
			r := asReader(req(fmt.Sprintf("k%03d", (i*(c+3))%150), "c", ttl))
			if _, err := s.Acquire(ctx, r); err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			rs = append(rs, r)
		}
		sets = append(sets, rs)
	}
	s := storeNS(t, pool, pglease.ModeTable, ns)
	var wg sync.WaitGroup
	for _, rs := range sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				if round%2 == 1 {
					slices.Reverse(rs)
				}
				for _, err := range s.RenewMany(ctx, rs) {
					if err != nil {
						t.Errorf("RenewMany: %v", err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestSharedEitherKind: a holder's retried Acquire, Renew and Release work
// whatever its request's Shared says, as memlease's do; the retry keeps the
// fence and the kind of the hold.
func TestSharedEitherKind(t *testing.T) {
	const ttl = 30 * time.Second
	ctx := testCtx(t, 30*time.Second)
	s := newStore(t, sharedPool(t), pglease.ModeTable)
	r, w := asReader(req("r", "reader", ttl)), req("w", "writer", ttl)
	fences := map[string]uint64{}
	for _, q := range []driver.Request{r, w} {
		g, err := s.Acquire(ctx, q)
		if err != nil {
			t.Fatalf("Acquire for %s: %v", q.Holder, err)
		}
		fences[q.Key] = g.Fence
	}
	flip := func(q driver.Request) driver.Request { q.Shared = !q.Shared; return q }
	for _, q := range []driver.Request{flip(r), flip(w)} {
		if g, err := s.Acquire(ctx, q); err != nil || g.Fence != fences[q.Key] {
			t.Fatalf("retried Acquire of the other kind for %s: fence %d, %v; want %d", q.Holder, g.Fence, err, fences[q.Key])
		}
	}
	if info, err := s.Inspect(ctx, "r"); err != nil || !info.Shared || info.Readers != 1 {
		t.Fatalf("Inspect of the reader's key = %+v, %v; want one reader", info, err)
	}
	if info, err := s.Inspect(ctx, "w"); err != nil || info.Shared || info.Holder != "writer" {
		t.Fatalf("Inspect of the writer's key = %+v, %v; want the writer", info, err)
	}
	if errs := s.RenewMany(ctx, []driver.Request{flip(r), flip(w)}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("RenewMany of the other kind = %v", errs)
	}
	for _, q := range []driver.Request{flip(r), flip(w)} {
		if err := s.Release(ctx, q); err != nil {
			t.Fatalf("Release of the other kind for %s: %v", q.Holder, err)
		}
		if info, err := s.Inspect(ctx, q.Key); err != nil || info.Held {
			t.Fatalf("Inspect after %s's release = %+v, %v; want free", q.Holder, info, err)
		}
	}
}
