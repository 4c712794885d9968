// Store: construction, validation and the single-lease operations.

package redislease

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

// MaxKeyLen is the longest lease key, in bytes, the store accepts.
const MaxKeyLen = lease.MaxKeyLen

// MinTTL is the granularity of Redis expiries; TTLs are rounded up to it.
const MinTTL = time.Millisecond

var (
	_ lease.Store        = (*Store)(nil)
	_ lease.BatchRenewer = (*Store)(nil)
	_ lease.Notifier     = (*Store)(nil)
	_ lease.Limiter      = (*Store)(nil)
	_ lease.Queuer       = (*Store)(nil)
)

// Store keeps leases in Redis. It is safe for concurrent use and holds no
// resources of its own: it runs no goroutines and does not own the client.
type Store struct {
	client    redis.UniversalClient
	prefix    string
	channel   string       // the namespace's release channel
	own       string       // this store's channel: hand-offs to its waiters
	id        string       // random; names own and this store's queue entries
	ack       replicaAck   // WithReplicaAck: WAIT after each write
	listening atomic.Int32 // open subscriptions: queued entries ask for a hand-off

	maxWaiters int // WithMaxWaiters: the cap of each key's queue
}

// New returns a Store that keeps leases in Redis through client. The store
// does not close client: the caller owns it and closes it after the store's
// last use.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redislease: %w", lease.Invalid("store", "nil redis client"))
	}
	c := config{prefix: DefaultPrefix, maxWaiters: lease.DefaultMaxWaiters}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if !validPrefix(c.prefix) {
		return nil, fmt.Errorf("redislease: %w", lease.Invalid("prefix", "%q contains '{' or '}'", c.prefix))
	}
	if err := c.ack.check(client); err != nil {
		return nil, fmt.Errorf("redislease: %w", err)
	}
	id, err := storeID()
	if err != nil {
		return nil, fmt.Errorf("redislease: %w", err)
	}
	ch := c.prefix + "released"
	if err := lease.CheckMaxWaiters(c.maxWaiters); err != nil {
		return nil, fmt.Errorf("redislease: %w", err)
	}
	return &Store{client: client, prefix: c.prefix, channel: ch, own: ch + ":" + id, id: id, ack: c.ack, maxWaiters: c.maxWaiters}, nil
}

// Prefix returns the namespace prefix of the store's keys.
func (s *Store) Prefix() string { return s.prefix }

// Client returns the Redis client the store was given (its caller owns it).
func (s *Store) Client() redis.UniversalClient { return s.client }

// Channel returns the namespace's Pub/Sub channel, on which releases are
// published; a release that hands a key to a waiter is published on the
// waiter's store's own channel instead (see the package documentation).
func (s *Store) Channel() string { return s.channel }

// Limits reports the store's limits: keys of at most MaxKeyLen bytes and a
// TTL granularity of one millisecond.
func (s *Store) Limits() lease.Limits {
	return lease.Limits{MinTTL: MinTTL, MaxKeyLen: MaxKeyLen}
}

// Close does nothing: the store owns no resources, and the Redis client it
// was given stays open (its owner closes it).
func (s *Store) Close() error { return nil }

// QueuesWaiters reports true: the store hands a freed key to the waiter that
// has waited longest (see [lease.Queuer] and the package documentation).
func (s *Store) QueuesWaiters() bool { return true }

// Acquire takes r.Key for r.Token for r.TTL if it is free and no live waiter
// is queued ahead of r.Token, refreshes the TTL if r.Token already holds it,
// and otherwise returns a *lease.HeldError whose Queued counts the waiters
// ahead. With r.Queue, a refused token is queued, or its entry refreshed for
// r.TTL (see [lease.Queuer]); a granted token leaves the queue.
func (s *Store) Acquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	if err := validate(r, true); err != nil {
		return lease.Grant{}, fmt.Errorf("redislease: acquire %q: %w", r.Key, err)
	}
	if err := lease.CheckHolder(r.Holder); err != nil {
		return lease.Grant{}, fmt.Errorf("redislease: acquire %q: %w", r.Key, err)
	}
	queue, listens := "0", ""
	if r.Queue {
		queue = "1"
	}
	if s.listening.Load() > 0 {
		listens = s.id
	}
	lk, fk, qk, qx, qd := s.scriptKeys(r.Key)
	cmd, ack := s.run(ctx, acquireScript, []string{lk, fk, qk, qx, qd},
		r.Token, r.Holder, ttlMillis(r.TTL), queue, listens, s.maxWaiters)
	v, err := cmd.Result()
	if err != nil {
		return lease.Grant{}, fmt.Errorf("redislease: acquire %q: %w", r.Key, err)
	}
	if f, granted := v.(string); granted { // the fence alone: granted
		fence, err := parseFence(f)
		if err == nil {
			err = ack // granted on the primary, but not on enough replicas
		}
		if err != nil {
			return lease.Grant{}, fmt.Errorf("redislease: acquire %q: %w", r.Key, err)
		}
		return lease.Grant{Fence: fence}, nil
	}
	res, ok := v.([]any)
	if !ok {
		return lease.Grant{}, fmt.Errorf("redislease: acquire %q: unexpected reply %T", r.Key, v)
	}
	holder, err1 := replyString(res, 1)
	pttl, err2 := replyInt(res, 2)
	fence, err3 := replyUint(res, 3)
	ahead, err4 := replyInt(res, 4)
	if err := firstErr(err1, err2, err3, err4); err != nil {
		return lease.Grant{}, fmt.Errorf("redislease: acquire %q: %w", r.Key, err)
	}
	if full, _ := replyInt(res, 0); full == -1 {
		return lease.Grant{}, fmt.Errorf("redislease: acquire %q: %w", r.Key, &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters})
	}
	return lease.Grant{}, &lease.HeldError{Key: r.Key, Holder: holder, Fence: fence, Remaining: millis(pttl), Queued: int(ahead)}
}

// Renew extends r.Key to r.TTL from now if r.Token still holds it, and
// otherwise returns an error wrapping lease.ErrNotHeld.
func (s *Store) Renew(ctx context.Context, r lease.Request) error {
	if err := validate(r, true); err != nil {
		return fmt.Errorf("redislease: renew %q: %w", r.Key, err)
	}
	cmd, ack := s.run(ctx, renewScript, []string{s.leaseKey(r.Key)}, leaseToken(r.Token), ttlMillis(r.TTL))
	n, err := cmd.Int64()
	if err == nil && n == 1 && ack != nil {
		return fmt.Errorf("redislease: renew %q: %w", r.Key, ack)
	}
	return renewResult(r.Key, n, err)
}

func renewResult(key string, n int64, err error) error {
	if err != nil {
		return fmt.Errorf("redislease: renew %q: %w", key, err)
	}
	if n != 1 {
		return fmt.Errorf("redislease: renew %q: %w", key, lease.ErrNotHeld)
	}
	return nil
}

// Release frees r.Key if r.Token holds it and publishes the key on the
// release channel; otherwise it returns an error wrapping lease.ErrNotHeld.
// The key's fence counter is kept. It also takes r.Token out of the key's
// queue of waiters, publishing the key if that removed an entry while the key
// is free, so that the next waiter looks again.
func (s *Store) Release(ctx context.Context, r lease.Request) error {
	if err := validate(r, false); err != nil {
		return fmt.Errorf("redislease: release %q: %w", r.Key, err)
	}
	lk, fk, qk, qx, qd := s.scriptKeys(r.Key)
	cmd, ack := s.run(ctx, releaseScript, []string{lk, qk, qx, qd, fk}, r.Token, s.channel, r.Key, leaseToken(r.Token))
	n, err := cmd.Int64()
	if err == nil && n == 1 {
		err = ack // released on the primary, but not on enough replicas
	}
	if err != nil {
		return fmt.Errorf("redislease: release %q: %w", r.Key, err)
	}
	if n != 1 {
		return fmt.Errorf("redislease: release %q: %w", r.Key, lease.ErrNotHeld)
	}
	return nil
}

// Inspect reports who holds key. For a free key, Info.Fence is the last
// fence granted for it, if Redis still has the counter.
func (s *Store) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if err := validKey(key); err != nil {
		return lease.Info{}, fmt.Errorf("redislease: inspect %q: %w", key, err)
	}
	res, err := inspectScript.Run(ctx, s.client, []string{s.leaseKey(key), s.fenceKey(key)}).Slice()
	if err != nil {
		return lease.Info{}, fmt.Errorf("redislease: inspect %q: %w", key, err)
	}
	held, err1 := replyInt(res, 0)
	holder, err2 := replyString(res, 1)
	fence, err3 := replyUint(res, 2)
	pttl, err4 := replyInt(res, 3)
	if err := firstErr(err1, err2, err3, err4); err != nil {
		return lease.Info{}, fmt.Errorf("redislease: inspect %q: %w", key, err)
	}
	if held != 1 {
		return lease.Info{Key: key, Fence: fence}, nil
	}
	return lease.Info{Key: key, Held: true, Holder: holder, Fence: fence, Remaining: millis(pttl)}, nil
}

func validKey(key string) error {
	if key == "" {
		return lease.Invalid("key", "empty")
	}
	if len(key) > MaxKeyLen {
		return lease.Invalid("key", "longer than %d bytes", MaxKeyLen)
	}
	if strings.IndexByte(key, 0) >= 0 {
		return lease.Invalid("key", "contains a NUL byte (announcements separate the key with NUL)")
	}
	return nil
}

func validate(r lease.Request, needTTL bool) error {
	if err := validKey(r.Key); err != nil {
		return err
	}
	if r.Token == "" {
		return lease.Invalid("token", "empty")
	}
	if strings.IndexByte(r.Token, 0) >= 0 {
		return lease.Invalid("token", "contains a NUL byte (the lease string separates its fields with NUL)")
	}
	if needTTL && r.TTL <= 0 {
		return lease.Invalid("ttl", "%v is not positive", r.TTL)
	}
	return nil
}

// leaseToken is how a lease string starts when token holds it (see
// grant.lua): the token and the NUL byte after it.
func leaseToken(token string) string { return token + "\x00" }

// ttlMillis rounds d up to whole milliseconds, as PEXPIRE takes them.
func ttlMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// millis converts a PTTL reply; negative values (no TTL, no key) become 0.
func millis(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func replyAt(res []any, i int) (any, error) {
	if i >= len(res) {
		return nil, fmt.Errorf("unexpected script reply: %d elements, want more than %d", len(res), i)
	}
	return res[i], nil
}

func replyInt(res []any, i int) (int64, error) {
	v, err := replyAt(res, i)
	if err != nil {
		return 0, err
	}
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("unexpected script reply element %d: %T", i, v)
}

func replyString(res []any, i int) (string, error) {
	v, err := replyAt(res, i)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("unexpected script reply element %d: %T", i, v)
	}
	return s, nil
}

// parseFence parses a fence the scripts return as a decimal string; ""
// (no counter) is 0.
func parseFence(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad fence %q: %w", v, err)
	}
	return n, nil
}

// replyUint parses a fence; "" (no counter) is 0.
func replyUint(res []any, i int) (uint64, error) {
	v, err := replyAt(res, i)
	if err != nil {
		return 0, err
	}
	switch v := v.(type) {
	case string:
		return parseFence(v)
	case int64:
		if v >= 0 {
			return uint64(v), nil
		}
	}
	return 0, fmt.Errorf("unexpected script reply element %d: %v", i, v)
}
