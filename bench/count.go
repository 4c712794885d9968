// Counters for the heartbeat scenario: a store wrapper counting renewal
// calls, and wire-level counters per store (go-redis hook, pgx tracer, gRPC
// interceptors, a counting ZooKeeper dialer).

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/leasekit/lease/driver"
)

type grpcDialOption = grpc.DialOption

// countingStore counts the renewal calls the Client makes. Use countingBatch
// for a store that is a BatchRenewer.
type countingStore struct {
	driver.Store
	renews    atomic.Int64 // Renew calls
	batches   atomic.Int64 // RenewMany calls
	batchSize atomic.Int64 // leases renewed through RenewMany

	mu     sync.Mutex
	rounds []time.Duration // each RenewMany call's duration, in call order
}

// roundCount returns how many RenewMany calls have ended.
func (c *countingStore) roundCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.rounds)
}

// roundsSince returns the durations of the RenewMany calls that ended after
// the first n.
func (c *countingStore) roundsSince(n int) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.rounds[min(n, len(c.rounds)):])
}

func (c *countingStore) Renew(ctx context.Context, r driver.Request) error {
	c.renews.Add(1)
	return c.Store.Renew(ctx, r)
}

type countingBatch struct{ *countingStore }

func (c countingBatch) RenewMany(ctx context.Context, rs []driver.Request) []error {
	c.batches.Add(1)
	c.batchSize.Add(int64(len(rs)))
	t0 := time.Now()
	errs := c.Store.(driver.BatchRenewer).RenewMany(ctx, rs)
	d := time.Since(t0)
	c.mu.Lock()
	c.rounds = append(c.rounds, d)
	c.mu.Unlock()
	return errs
}

// The optional interfaces of the heartbeat scenario's stores besides
// BatchRenewer: every one announces, lists and breaks; the stores that batch
// renewals on a network also batch acquisitions and releases.
type (
	extras interface {
		driver.Notifier
		driver.Lister
		driver.Breaker
	}
	batchExtras interface {
		extras
		driver.BatchAcquirer
		driver.BatchReleaser
	}
	countingExtras struct {
		countingBatch
		extras
	}
	countingBatchExtras struct {
		countingBatch
		batchExtras
	}
)

// countStore wraps st in a store that counts its renewals and has exactly
// st's optional interfaces: a wrapper that hid BatchAcquirer made 100,000
// acquisitions single calls, which a real Client never sends.
func countStore(st driver.Store) (driver.Store, *countingStore, error) {
	c := &countingStore{Store: st}
	var w driver.Store = c
	if _, ok := st.(driver.BatchRenewer); ok {
		switch s := st.(type) {
		case batchExtras:
			w = countingBatchExtras{countingBatch{c}, s}
		case extras:
			w = countingExtras{countingBatch{c}, s}
		default:
			w = countingBatch{c}
		}
	}
	if got, want := optionals(w), optionals(st); got != want {
		return nil, nil, fmt.Errorf("no counting wrapper for a %T: it would have the optional interfaces %s, not %s", st, got, want)
	}
	return w, c, nil
}

// optionals names the optional driver interfaces st implements.
func optionals(st driver.Store) string {
	var names []string
	for _, o := range []struct {
		name string
		ok   bool
	}{
		{"BatchRenewer", is[driver.BatchRenewer](st)},
		{"BatchAcquirer", is[driver.BatchAcquirer](st)},
		{"BatchReleaser", is[driver.BatchReleaser](st)},
		{"Notifier", is[driver.Notifier](st)},
		{"Lister", is[driver.Lister](st)},
		{"Breaker", is[driver.Breaker](st)},
	} {
		if o.ok {
			names = append(names, o.name)
		}
	}
	return "[" + strings.Join(names, " ") + "]"
}

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// wire counts round trips and messages sent on the wire by a store's
// client: n counts round trips (a pipeline once), msgs every request in
// them (a Redis command, a PostgreSQL statement, a gRPC unary call or stream
// message, a ZooKeeper write). On Redis it
// also records the names of the commands the client sends itself (a
// transaction's as MULTI and EXEC), so that the server's per-command times
// can be summed without counting the commands scripts and transactions run
// twice (see redisCost).
type wire struct {
	n     atomic.Int64 // round trips
	msgs  atomic.Int64 // requests, each message of a pipeline
	pings atomic.Int64 // ZooKeeper: the writes that are the library's pings
	bytes atomic.Int64 // ZooKeeper: bytes written
	names sync.Map     // lower-case Redis command name -> struct{}
}

// add counts one round trip carrying msgs requests.
func (w *wire) add(msgs int) {
	w.n.Add(1)
	w.msgs.Add(int64(msgs))
}

func (w *wire) sent(name string) { w.names.LoadOrStore(name, struct{}{}) }

// commandNames returns the Redis commands w's clients sent.
func (w *wire) commandNames() []string {
	var out []string
	w.names.Range(func(k, _ any) bool {
		out = append(out, k.(string))
		return true
	})
	return out
}

// requestCounters holds one wire per system ("system/store"): every Locker
// of the system counts its client's requests there, so that the cycle and
// contention scenarios can report requests per acquisition.
var requestCounters sync.Map

func counterFor(sysKey string) *wire {
	v, _ := requestCounters.LoadOrStore(sysKey, &wire{})
	return v.(*wire)
}

// hasWireCounter reports whether hooksFor counts store's round trips.
func hasWireCounter(store string) bool {
	switch store {
	case "redis", "postgres-table", "postgres-advisory", "etcd", "zookeeper":
		return true
	}
	return false
}

// hooksFor returns the hooks that count a leasekit store's requests in w
// (the stores of hasWireCounter).
func hooksFor(store string, w *wire) storeHooks {
	switch store {
	case "redis":
		return storeHooks{redisHook: redisHook{w}}
	case "postgres-table", "postgres-advisory":
		return storeHooks{pgTracer: &pgCounter{w}}
	case "etcd":
		return storeHooks{etcdDialer: grpcCounting(w)}
	case "zookeeper":
		return storeHooks{zkDialer: zkDialer(w)}
	}
	return storeHooks{}
}

// redisHook counts round trips: one per command or pipeline.
type redisHook struct{ w *wire }

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.w.add(1)
		h.w.sent(strings.ToLower(cmd.Name()))
		return next(ctx, cmd)
	}
}
func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.w.add(len(cmds))
		if len(cmds) > 0 && strings.EqualFold(cmds[0].Name(), "multi") {
			h.w.sent("multi") // the queued commands run inside EXEC
			h.w.sent("exec")
		} else {
			for _, c := range cmds {
				h.w.sent(strings.ToLower(c.Name()))
			}
		}
		return next(ctx, cmds)
	}
}

// pgCounter counts statements sent: a round trip per query (pgx
// QueryTracer) and per batch, whose statements pgx sends together (pgx
// BatchTracer; a batch's statements do not reach TraceQueryStart).
type pgCounter struct{ w *wire }

func (p *pgCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	p.w.add(1)
	return ctx
}
func (p *pgCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (p *pgCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if d.Batch != nil {
		p.w.add(d.Batch.Len())
	}
	return ctx
}
func (p *pgCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (p *pgCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

var _ pgx.BatchTracer = (*pgCounter)(nil)

// grpcCounting counts a round trip per unary call and, on a stream, per
// message sent while none of the stream's earlier messages awaits an answer:
// messages sent behind it before it is answered are pipelined on the same
// round trip (as a Redis pipeline counts once). Every message counts in
// msgs. An answer is any message received; a stream whose server sends
// several messages per request (a watch) just has none awaiting.
func grpcCounting(w *wire) []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		w.add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return countingStream{s, w, new(atomic.Int64)}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

type countingStream struct {
	grpc.ClientStream
	w       *wire
	waiting *atomic.Int64 // messages sent and not yet answered
}

func (s countingStream) SendMsg(m any) error {
	s.w.msgs.Add(1)
	if s.waiting.Add(1) == 1 {
		s.w.n.Add(1)
	}
	return s.ClientStream.SendMsg(m)
}

func (s countingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	for n := s.waiting.Load(); err == nil && n > 0 && !s.waiting.CompareAndSwap(n, n-1); n = s.waiting.Load() {
	}
	return err
}

// zkDialer counts Write calls on ZooKeeper connections (the library writes
// each request, pings included, with one Write).
func zkDialer(w *wire) func(network, address string, timeout time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return countingConn{c, w}, nil
	}
}

type countingConn struct {
	net.Conn
	w *wire
}

func (c countingConn) Write(b []byte) (int, error) {
	c.w.add(1)
	// A request is length 4, xid 4, opcode 4; a ping has xid −2, opcode 11.
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[4:8])) == -2 && binary.BigEndian.Uint32(b[8:12]) == 11 {
		c.w.pings.Add(1)
	}
	c.w.bytes.Add(int64(len(b)))
	return c.Conn.Write(b)
}
