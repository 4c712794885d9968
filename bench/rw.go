// Scenarios 6 and 7 (issue #23): read-heavy contention on one key (16
// readers and 2 writers) and AcquireAll of 4 keys out of 8 under contention.
//
// Unlike §2, an acquire call is never cut short when a phase ends: every
// attempt runs to its end or to attemptTimeout, and a worker stops only
// between attempts. Every wait is therefore complete (wait max is the true
// longest wait, the starvation and deadlock check), and a timeout counts
// as one in the record.

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"
	"go.uber.org/zap"
)

// attemptTimeout bounds one acquire call in scenarios 6 and 7; an attempt
// that reaches it counts as a timeout (for AcquireAll: a deadlock or a
// livelock).
const attemptTimeout = 30 * time.Second

// Read-heavy shape: readers and writers on one key.
const (
	rwReaders = 16
	rwWriters = 2
)

// Acquire-all shape: each acquisition takes allPick keys of allKeys.
const (
	allKeys = 8
	allPick = 4
)

// RWLocker is one worker's handle on one key, held shared or exclusively.
type RWLocker interface {
	Lock(ctx context.Context, shared bool) (unlock func(context.Context) error, err error)
	Close() error
}

// MultiLocker is one worker's handle on a set of keys, held all together.
type MultiLocker interface {
	LockAll(ctx context.Context, keys []string) (unlock func(context.Context) error, err error)
	Close() error
}

// extSystem is a system of scenario 6 or 7. Base is the allSystems key
// that -systems selects it by (besides its own Key).
type extSystem struct {
	Name, Store, Note, Base string
	MinTTL                  time.Duration
	NewRW                   func(ctx context.Context, env *Env, key string, ttl time.Duration) (RWLocker, error)
	NewMulti                func(ctx context.Context, env *Env, ttl time.Duration) (MultiLocker, error)
}

// Key returns the system's id "system/store".
func (s extSystem) Key() string { return s.Name + "/" + s.Store }

// errNoShared is a leasekit store without Caps.Shared (yet).
var errNoShared = fmt.Errorf("store has no shared leases (Caps.Shared is false; AcquireShared refuses with %w)", errors.ErrUnsupported)

// readHeavySystems lists scenario 6's systems for the selected base
// systems: leasekit shared on every leasekit store, etcd's RWMutex recipe
// (the Go peer of Redisson's RReadWriteLock model), and leasekit's
// exclusive lease doing the same work on the stores without a Go peer.
func readHeavySystems(base []System) []extSystem {
	var out []extSystem
	for _, s := range base {
		switch {
		case s.Name == "leasekit":
			lk := extSystem{Name: "leasekit", Store: s.Store, Base: s.Key(), MinTTL: s.MinTTL,
				Note: s.Note + "; readers AcquireShared, writers Acquire", NewRW: leaseRW(s, true)}
			out = append(out, lk)
			if s.Store != "etcd" {
				out = append(out, extSystem{Name: "leasekit-exclusive", Store: s.Store, Base: s.Key(), MinTTL: s.MinTTL,
					Note: s.Note + "; readers and writers both Acquire (exclusive): the baseline where no Go peer has read-write locks", NewRW: leaseRW(s, false)})
			}
		case s.Key() == "etcd-mutex/etcd":
			out = append(out, extSystem{Name: "etcd-rwmutex", Store: "etcd", Base: s.Key(), MinTTL: s.MinTTL,
				Note:  "etcd client v3.5 experimental/recipes RWMutex (no fence, no context: a call the phase outlives is finished in a goroutine), one session (TTL in s) per worker",
				NewRW: newEtcdRW})
		}
	}
	return out
}

// acquireAllSystems lists scenario 7's systems: leasekit's AcquireAll on
// every leasekit store, and on Redis the naive approach with redislock,
// taking the keys one by one in sorted order.
func acquireAllSystems(base []System) []extSystem {
	var out []extSystem
	for _, s := range base {
		switch {
		case s.Name == "leasekit":
			out = append(out, extSystem{Name: "leasekit", Store: s.Store, Base: s.Key(), MinTTL: s.MinTTL,
				Note: s.Note + "; Client.AcquireAll", NewMulti: leaseMulti(s)})
		case s.Key() == "redislock-exp/redis":
			out = append(out, extSystem{Name: "redislock-sorted", Store: "redis", Base: s.Key(),
				Note:     "bsm/redislock v0.9.4, the keys one by one in sorted order (no deadlock, no fences), ExponentialBackoff(4ms, 512ms) per Obtain; on a failure the keys held are released",
				NewMulti: newRedislockMulti})
		}
	}
	return out
}

// ---------------------------------------------------------------- systems

// leaseRW makes leasekit RWLockers on sys's store: readers AcquireShared
// when shared, else Acquire.
func leaseRW(sys System, shared bool) func(context.Context, *Env, string, time.Duration) (RWLocker, error) {
	return func(ctx context.Context, env *Env, key string, ttl time.Duration) (RWLocker, error) {
		l, err := sys.New(ctx, env, key, ttl)
		if err != nil {
			return nil, err
		}
		ll := l.(*leaseLocker)
		if shared && !ll.st.Caps().Shared {
			_ = ll.Close()
			return nil, errNoShared
		}
		return &leaseRWLocker{leaseLocker: ll, shared: shared}, nil
	}
}

type leaseRWLocker struct {
	*leaseLocker
	shared bool // readers take shared leases
}

func (l *leaseRWLocker) Lock(ctx context.Context, shared bool) (func(context.Context) error, error) {
	if !shared || !l.shared {
		return l.leaseLocker.Lock(ctx)
	}
	ls, err := l.c.AcquireShared(ctx, l.key)
	if err != nil {
		return nil, err
	}
	return ls.Release, nil
}

// leaseMulti makes leasekit MultiLockers on sys's store.
func leaseMulti(sys System) func(context.Context, *Env, time.Duration) (MultiLocker, error) {
	return func(ctx context.Context, env *Env, ttl time.Duration) (MultiLocker, error) {
		l, err := sys.New(ctx, env, "", ttl)
		if err != nil {
			return nil, err
		}
		return leaseMultiLocker{l.(*leaseLocker)}, nil
	}
}

type leaseMultiLocker struct{ *leaseLocker }

func (l leaseMultiLocker) LockAll(ctx context.Context, keys []string) (func(context.Context) error, error) {
	m, err := l.c.AcquireAll(ctx, keys...)
	if err != nil {
		return nil, err
	}
	return m.Release, nil
}

// etcdRW is etcd's RWMutex recipe. It takes no context: Lock runs it in a
// goroutine and, when ctx ends first, waits for it and gives the lock back,
// so that the locker stays usable; should that take long, it closes the
// client (the locker is then broken for good).
type etcdRW struct {
	cli  *clientv3.Client
	sess *concurrency.Session
	m    *recipe.RWMutex
	once sync.Once
}

func newEtcdRW(ctx context.Context, env *Env, key string, ttl time.Duration) (RWLocker, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: env.Etcd, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: grpcCounting(counterFor("etcd-rwmutex/etcd"))})
	if err != nil {
		return nil, err
	}
	secs := max(int((ttl+time.Second-1)/time.Second), 1)
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(secs), concurrency.WithContext(context.Background()))
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &etcdRW{cli: cli, sess: sess, m: recipe.NewRWMutex(sess, "/bench-rwmutex/"+env.Run+"/"+key)}, nil
}

func (e *etcdRW) Lock(ctx context.Context, shared bool) (func(context.Context) error, error) {
	lock, unlock := e.m.Lock, e.m.Unlock
	if shared {
		lock, unlock = e.m.RLock, e.m.RUnlock
	}
	done := make(chan error, 1)
	go func() { done <- lock() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return func(context.Context) error { return unlock() }, nil
	case <-ctx.Done():
		select {
		case err := <-done:
			if err == nil {
				_ = unlock()
			}
		case <-time.After(10 * time.Second):
			e.once.Do(func() { _ = e.cli.Close() })
			<-done
		}
		return nil, ctx.Err()
	}
}

func (e *etcdRW) Close() error {
	_ = e.sess.Close()
	var err error
	e.once.Do(func() { err = e.cli.Close() })
	return err
}

// redislockMulti takes the keys one by one in sorted order with redislock.
type redislockMulti struct {
	rdb *redis.Client
	c   *redislock.Client
	ttl time.Duration
}

func newRedislockMulti(ctx context.Context, env *Env, ttl time.Duration) (MultiLocker, error) {
	rdb := newCountedRedis(env.RedisAddr, counterFor("redislock-sorted/redis"))
	return &redislockMulti{rdb: rdb, c: redislock.New(rdb), ttl: ttl}, nil
}

func (r *redislockMulti) LockAll(ctx context.Context, keys []string) (func(context.Context) error, error) {
	var held []*redislock.Lock
	release := func(ctx context.Context) error {
		var errs []error
		for _, l := range held {
			errs = append(errs, l.Release(ctx))
		}
		return errors.Join(errs...)
	}
	for _, k := range slices.Sorted(slices.Values(keys)) {
		one := &redislockLocker{rdb: r.rdb, c: r.c, key: k, ttl: r.ttl, strategy: func() redislock.RetryStrategy {
			return redislock.ExponentialBackoff(4*time.Millisecond, 512*time.Millisecond)
		}}
		l, err := one.obtain(ctx)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = release(rctx)
			cancel()
			return nil, err
		}
		held = append(held, l)
	}
	return release, nil
}

func (r *redislockMulti) Close() error { return r.rdb.Close() }

// ---------------------------------------------------------------- harness

// loopStats is one group of workers' measurement (readers, writers, or
// every worker of scenario 7).
type loopStats struct {
	ops      int // acquisitions that completed inside a measured window
	waits    []time.Duration
	timeouts int
	errors   int
	per      []int
	held     time.Duration
}

// extRun is one system's measurement in scenario 6 or 7, run in phases
// interleaved with the other systems' (as §2). Its workers connect at the
// start of each phase and disconnect at its end, so that only one system's
// connections are open at a time (72 PostgreSQL clients kept open at once
// exceeded the server's max_connections).
type extRun struct {
	sys      extSystem
	env      *Env
	scenario string
	hold     time.Duration
	ttl      time.Duration
	key      string
	skipped  string
	rw       []RWLocker
	multi    []MultiLocker
	roles    []int // per worker: 0 reader (or scenario 7), 1 writer
	keys     []string
	mu       sync.Mutex
	st       [2]*loopStats
	el       time.Duration
	// Scenario 6's exclusion check, from the workers' own view: holders
	// now, the most readers seen together, and acquisitions that found a
	// writer beside them.
	readers, writers, maxReaders, overlaps int
}

func setupExt(ctx context.Context, env *Env, sys extSystem, scenario string, workers int, hold time.Duration) *extRun {
	c := &extRun{sys: sys, env: env, scenario: scenario, hold: hold}
	c.ttl = max(5*time.Second, sys.MinTTL)
	c.key = fmt.Sprintf("%s-%s-%s", scenario, sys.Name, sys.Store)
	if scenario == "acquire-all" {
		for i := range allKeys {
			c.keys = append(c.keys, fmt.Sprintf("%s-k%d", c.key, i))
		}
		c.roles = make([]int, workers)
	} else {
		c.roles = make([]int, rwReaders+rwWriters)
		for i := rwReaders; i < len(c.roles); i++ {
			c.roles[i] = 1
		}
	}
	c.open(ctx) // a first connection, to find out whether the system can run
	c.close()
	c.reset()
	return c
}

// open connects every worker, or sets c.skipped.
func (c *extRun) open(ctx context.Context) {
	if c.scenario == "acquire-all" {
		c.multi = make([]MultiLocker, len(c.roles))
	} else {
		c.rw = make([]RWLocker, len(c.roles))
	}
	errs := make([]error, len(c.roles))
	var wg sync.WaitGroup
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	for i := range c.roles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.multi != nil {
				c.multi[i], errs[i] = c.sys.NewMulti(sctx, c.env, c.ttl)
			} else {
				c.rw[i], errs[i] = c.sys.NewRW(sctx, c.env, c.key, c.ttl)
			}
		}()
	}
	wg.Wait()
	cancel()
	if err := errors.Join(errs...); err != nil {
		c.skipped = "setup: " + err.Error()
		for _, e := range errs {
			if errors.Is(e, errNoShared) {
				c.skipped = errNoShared.Error()
			}
		}
		c.close()
	}
}

func (c *extRun) reset() {
	for i := range c.st {
		c.st[i] = &loopStats{per: make([]int, len(c.roles))}
	}
	c.el, c.maxReaders, c.overlaps = 0, 0, 0
}

func (c *extRun) close() {
	closeAll(c.rw)
	closeAll(c.multi)
	c.rw, c.multi = nil, nil
}

// phase lets the workers contend for dur; each finishes its attempt in
// progress when dur is over (bounded by attemptTimeout).
func (c *extRun) phase(ctx context.Context, dur time.Duration) {
	if c.skipped != "" {
		return
	}
	if c.open(ctx); c.skipped != "" {
		return
	}
	defer c.close()
	var stop atomic.Bool
	start := time.Now()
	var wg sync.WaitGroup
	for w := range c.roles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(w)))
			for !stop.Load() && ctx.Err() == nil {
				c.attempt(ctx, w, rng, &stop)
			}
		}()
	}
	select {
	case <-time.After(dur):
	case <-ctx.Done():
	}
	stop.Store(true)
	c.el += time.Since(start)
	wg.Wait()
}

func (c *extRun) attempt(ctx context.Context, w int, rng *rand.Rand, stop *atomic.Bool) {
	role := c.roles[w]
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	t0 := time.Now()
	var unlock func(context.Context) error
	var err error
	if c.multi != nil {
		keys := make([]string, 0, allPick)
		for _, i := range rng.Perm(allKeys)[:allPick] { // overlapping sets, random order
			keys = append(keys, c.keys[i])
		}
		unlock, err = c.multi[w].LockAll(actx, keys)
	} else {
		unlock, err = c.rw[w].Lock(actx, role == 0)
	}
	t1 := time.Now()
	st := c.st[role]
	c.mu.Lock()
	switch {
	case err != nil && ctx.Err() != nil: // the run was interrupted
	case errors.Is(err, context.DeadlineExceeded):
		st.timeouts++
		st.waits = append(st.waits, t1.Sub(t0))
	case err != nil:
		st.errors++
	default:
		st.waits = append(st.waits, t1.Sub(t0))
		if !stop.Load() {
			st.ops++
			st.per[w]++
		}
		if role == 0 && c.multi == nil {
			c.readers++
			c.maxReaders = max(c.maxReaders, c.readers)
			if c.writers > 0 {
				c.overlaps++
			}
		} else if c.multi == nil {
			c.writers++
			if c.writers > 1 || c.readers > 0 {
				c.overlaps++
			}
		}
	}
	c.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		return
	}
	if c.hold > 0 {
		holdFor(c.hold)
	}
	c.mu.Lock()
	st.held += time.Since(t1)
	if c.multi == nil {
		if role == 0 {
			c.readers--
		} else {
			c.writers--
		}
	}
	c.mu.Unlock()
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := unlock(uctx); err != nil {
		c.mu.Lock()
		st.errors++
		c.mu.Unlock()
	}
	ucancel()
}

// results closes the lockers and returns the records: for scenario 6 one
// per role (readers, writers), for scenario 7 one.
func (c *extRun) results(workers int) []Result {
	base := Result{Scenario: c.scenario, System: c.sys.Name, Store: c.sys.Store, Note: c.sys.Note,
		TTLMs: ms(max(5*time.Second, c.sys.MinTTL)), HoldMs: ms(c.hold)}
	if c.skipped != "" {
		base.Skipped, base.Clients = c.skipped, workers
		if c.scenario == "read-heavy" {
			base.Clients = rwReaders + rwWriters
		}
		return []Result{base}
	}
	c.close()
	roles := []string{""}
	if c.scenario == "read-heavy" {
		roles = []string{"reader", "writer"}
	}
	var out []Result
	for i, role := range roles {
		st := c.st[i]
		r := base
		r.Role = role
		var per []int
		for w, n := range st.per {
			if c.roles[w] == i {
				per = append(per, n)
			}
		}
		r.Clients = len(per)
		r.DurationS = c.el.Seconds()
		r.Samples, r.Errors = st.ops, st.errors
		r.OpsPerS = float64(st.ops) / c.el.Seconds()
		r.PerWorker = per
		r.PerWorkerMin, r.PerWorkerMax = iptr(slices.Min(per)), iptr(slices.Max(per))
		r.WaitP50Ms, r.WaitP99Ms, r.WaitMaxMs = summary(st.waits)
		r.P50Ms, r.P99Ms, r.MaxMs = r.WaitP50Ms, r.WaitP99Ms, r.WaitMaxMs
		r.Counters = map[string]any{"timeouts": st.timeouts, "attempt_timeout_ms": ms(attemptTimeout)}
		if st.ops > 0 {
			r.Counters["hold_mean_ms"] = ms(st.held / time.Duration(len(st.waits)-st.timeouts))
		}
		if c.scenario == "read-heavy" {
			r.Counters["readers"], r.Counters["writers"] = rwReaders, rwWriters
			r.Counters["max_readers_together"] = c.maxReaders
			r.Counters["overlaps"] = c.overlaps
		} else {
			r.Counters["keys"], r.Counters["keys_per_acquisition"] = allKeys, allPick
		}
		out = append(out, r)
	}
	return out
}

// runExt measures every system for dur in total, interleaved in rounds as
// runContentions does.
func runExt(ctx context.Context, env *Env, syss []extSystem, scenario string, workers int, hold, dur time.Duration, rounds int) []Result {
	cs := make([]*extRun, len(syss))
	for i, sys := range syss {
		cs[i] = setupExt(ctx, env, sys, scenario, workers, hold)
	}
	for _, c := range cs {
		c.phase(ctx, contentionWarmUp)
		c.reset()
	}
	slice := dur / time.Duration(rounds)
	for round := 0; round < rounds && ctx.Err() == nil; round++ {
		for _, c := range rotated(cs, round) {
			c.phase(ctx, slice)
		}
	}
	var rs []Result
	for _, c := range cs {
		rs = append(rs, c.results(workers)...)
	}
	return rs
}

// selectExt keeps the systems that plan selects by their own key or their
// base's.
func selectExt(ss []extSystem, plan Plan) []extSystem {
	if len(plan.Systems) == 0 {
		return ss
	}
	var out []extSystem
	for _, s := range ss {
		if slices.Contains(plan.Systems, s.Key()) || slices.Contains(plan.Systems, s.Base) {
			out = append(out, s)
		}
	}
	return out
}
