package redislease

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix when WithPrefix is not given.
const DefaultPrefix = "lease:"

var (
	//go:embed readers.lua
	readersSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed batch.lua
	batchHelpers string
	//go:embed acquiremany.lua
	acquireManySrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed releasemany.lua
	releaseManySrc string
	//go:embed inspect.lua
	inspectSrc string

	// Each operation's script defines it as a function over a request's
	// keys; a script calls it once (on KEYS), or once per request of a batch
	// (each request's error an element of the reply: it fails that request
	// only). Renewals take KEYS from an offset; acquisitions and releases in
	// a batch take one key per request (acquiremany.lua, releasemany.lua).
	acquireScript     = redis.NewScript(readersSrc + acquireSrc + "local r = acquire(KEYS, unpack(ARGV))\nsaveFences()\nreturn r\n")
	acquireManyScript = redis.NewScript(readersSrc + acquireSrc + batchSrc() + acquireManySrc)
	renewScript       = redis.NewScript(readersSrc + renewSrc + "return renew(1, redis.call('GET', KEYS[1]), ARGV[1], ARGV[2], ARGV[3])\n")
	renewManyScript   = redis.NewScript(readersSrc + renewSrc + `local lks, res = {}, {}
for k = 1, #KEYS, 4 do
  lks[#lks + 1] = KEYS[k]
end
for i, cur in ipairs(redis.call('MGET', unpack(lks))) do
  res[i] = try(renew, 4 * i - 3, cur, ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i])
end
return res
`)
	releaseScript     = redis.NewScript(readersSrc + releaseSrc + "return release(KEYS, unpack(ARGV))\n")
	releaseManyScript = redis.NewScript(readersSrc + releaseSrc + batchSrc() + releaseManySrc)
	inspectScript     = redis.NewScript(readersSrc + inspectSrc)
)

var (
	_ driver.Store         = (*Store)(nil)
	_ driver.BatchRenewer  = (*Store)(nil)
	_ driver.BatchAcquirer = (*Store)(nil)
	_ driver.BatchReleaser = (*Store)(nil)
	_ driver.Notifier      = (*Store)(nil)
)

// Store keeps leases in Redis. It is safe for concurrent use, runs no
// goroutines and does not own its Redis client.
type Store struct {
	client     redis.UniversalClient
	prefix     string
	maxWaiters int
	ack        replicaAck
	id         string       // names the store's own release channel
	listening  atomic.Int32 // open subscriptions, which hear the own channel
	// Script arguments that never change, boxed once (boxing allocates).
	channelArg, maxWaitersArg, idArg any
}

type config struct {
	prefix     string
	maxWaiters int
	ack        replicaAck
}

// Option configures a Store.
type Option func(*config)

// WithPrefix sets the prefix of every Redis key and of the release channel
// (default [DefaultPrefix]). Stores with the same prefix on the same Redis
// share leases. The prefix must not contain '{' or '}'.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithMaxWaiters caps each key's queue at n live waiters (default
// [driver.DefaultMaxWaiters]); New refuses n outside
// 1..[driver.MaxMaxWaiters]. Stores sharing a prefix
// should use the same cap.
func WithMaxWaiters(n int) Option { return func(c *config) { c.maxWaiters = n } }

// New returns a Store that keeps leases in Redis through client, which the
// caller keeps and closes after the store's last use.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	c := config{prefix: DefaultPrefix, maxWaiters: driver.DefaultMaxWaiters}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	var err error
	switch {
	case client == nil:
		err = lease.Invalid("store", "nil redis client")
	case strings.ContainsAny(c.prefix, "{}"):
		err = lease.Invalid("prefix", "%q contains '{' or '}'", c.prefix)
	case c.maxWaiters < 1 || c.maxWaiters > driver.MaxMaxWaiters:
		err = lease.Invalid("max waiters", "%d is outside 1..%d", c.maxWaiters, driver.MaxMaxWaiters)
	default:
		err = c.ack.check(client)
	}
	if err != nil {
		return nil, fmt.Errorf("redislease: %w", err)
	}
	s := &Store{client: client, prefix: c.prefix, maxWaiters: c.maxWaiters, ack: c.ack, id: rand.Text()}
	s.channelArg, s.maxWaitersArg, s.idArg = s.channel(), s.maxWaiters, s.id
	return s, nil
}

// Prefix returns the prefix of the store's keys.
func (s *Store) Prefix() string { return s.prefix }

// Client returns the Redis client the store was given.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Caps reports FIFO, shared holds, the cap of waiters and millisecond TTLs.
func (s *Store) Caps() driver.Caps {
	return driver.Caps{MinTTL: time.Millisecond, FIFO: true, MaxWaiters: s.maxWaiters, Shared: true}
}

// Close does nothing: the Redis client stays open.
func (s *Store) Close() error { return nil }

// keys returns the lease, fence counter, queue, queue expiry, queue
// channel, readers, reader holder and tombstone keys of key, all with the
// hash tag {esc(key)}, hence in one Cluster slot.
func (s *Store) keys(key string) []string { return s.keysOf(key, allParts[:]) }

// The suffixes of keys, and of the keys each script takes: acquire.lua
// takes no tombstones, release.lua no fence counter either, renew.lua the
// lease, readers and tombstones.
var (
	allParts     = [...]string{"", ":fence", ":q", ":qx", ":qc", ":r", ":rh", ":b"}
	acquireParts = allParts[:7]
	releaseParts = []string{"", ":q", ":qx", ":qc", ":r", ":rh"}
	renewParts   = []string{"", ":r", ":rh", ":b"}
)

// batchSrc returns batch.lua after the definitions it needs: Lua tables of
// acquireParts and releaseParts.
func batchSrc() string {
	list := func(parts []string) string {
		q := make([]string, len(parts))
		for i, p := range parts {
			q[i] = "'" + p + "'"
		}
		return "{" + strings.Join(q, ", ") + "}"
	}
	return "local acquireParts, releaseParts = " + list(acquireParts) + ", " + list(releaseParts) + "\n" + batchHelpers
}

// keysOf returns the keys of key with the suffixes parts, as slices of
// one string: one allocation for all of them.
func (s *Store) keysOf(key string, parts []string) []string {
	return s.appendKeys(make([]string, 0, len(parts)), key, parts)
}

// appendKeys appends the keys of key with the suffixes parts to dst.
func (s *Store) appendKeys(dst []string, key string, parts []string) []string {
	esc := escaper.Replace(key)
	lk := len(s.prefix) + len(esc) + 2 // the length of leaseKey(key)
	n := 0
	for _, part := range parts {
		n += lk + len(part)
	}
	var b strings.Builder
	b.Grow(n)
	for _, part := range parts {
		b.WriteString(s.prefix)
		b.WriteByte('{')
		b.WriteString(esc)
		b.WriteByte('}')
		b.WriteString(part)
	}
	all := b.String()
	for _, part := range parts {
		dst, all = append(dst, all[:lk+len(part)]), all[lk+len(part):]
	}
	return dst
}

// renewKeys returns the lease, readers, reader holder and tombstone keys of
// key.
func (s *Store) renewKeys(key string) []string { return s.keysOf(key, renewParts) }

func (s *Store) leaseKey(key string) string { return s.prefix + "{" + escaper.Replace(key) + "}" }

// escaper keeps the hash tag exactly the key, and the mapping injective.
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// Acquire runs acquire.lua: see [driver.Store].
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if err := checkKey(r.Key); err != nil {
		return driver.Grant{}, err
	}
	v, err := s.run(ctx, acquireScript, s.keysOf(r.Key, acquireParts), s.acquireArgs(r)...)
	return s.granted(r, v, err)
}

// AcquireMany acquires up to chunk requests per EVALSHA, all in one
// pipeline (see batch). With WithReplicaAck it acquires one request at a
// time.
func (s *Store) AcquireMany(ctx context.Context, rs []driver.Request) ([]driver.Grant, []error) {
	gs, errs := make([]driver.Grant, len(rs)), make([]error, len(rs))
	if s.ack.n > 0 {
		for i, r := range rs {
			gs[i], errs[i] = s.Acquire(ctx, r)
		}
		return gs, errs
	}
	send := make([]int, 0, len(rs)) // the requests with a valid key
	for i, r := range rs {
		if errs[i] = checkKey(r.Key); errs[i] == nil {
			send = append(send, i)
		}
	}
	vs, verrs := s.batch(ctx, len(send), batchScripts{
		one: acquireScript, many: acquireManyScript, keys: 1, args: 1,
		common: func(j int) []any {
			r := rs[send[j]]
			return []any{s.maxWaitersArg, s.waiterID(), r.Holder, ttlMillis(r.TTL), r.Queue, r.Shared}
		},
		same: func(j, k int) bool {
			a, b := &rs[send[j]], &rs[send[k]]
			return a.Holder == b.Holder && ttlMillis(a.TTL) == ttlMillis(b.TTL) && a.Queue == b.Queue && a.Shared == b.Shared
		},
		add: func(keys []string, args []any, j int) ([]string, []any) {
			r := rs[send[j]]
			return append(keys, s.leaseKey(r.Key)), append(args, r.Token)
		},
		send: func(pipe redis.Pipeliner, j int) *redis.Cmd {
			r := rs[send[j]]
			return acquireScript.EvalSha(ctx, pipe, s.keysOf(r.Key, acquireParts), s.acquireArgs(r)...)
		},
	})
	for j, i := range send {
		gs[i], errs[i] = s.granted(rs[i], vs[j], verrs[j])
	}
	return gs, errs
}

// checkKey refuses a key Redis cannot take.
func checkKey(key string) error {
	if strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("redislease: acquire: %w", lease.Invalid("key", "contains a NUL byte"))
	}
	return nil
}

// acquireArgs returns acquire.lua's arguments for r.
func (s *Store) acquireArgs(r driver.Request) []any {
	return []any{r.Token, r.Holder, ttlMillis(r.TTL), r.Queue, s.maxWaitersArg, s.waiterID(), r.Shared}
}

// waiterID is the id a waiter is queued with: a release wakes a waiter on
// its store's own channel if the store listens, else on the namespace's.
func (s *Store) waiterID() any {
	if s.listening.Load() > 0 {
		return s.idArg
	}
	return ""
}

// granted reads acquire.lua's reply v (or err) for r.
func (s *Store) granted(r driver.Request, v any, err error) (driver.Grant, error) {
	if err = corrupt(err); err != nil {
		return driver.Grant{}, fmt.Errorf("redislease: acquire %q: %w", r.Key, err)
	}
	if f, ok := v.(string); ok {
		fence, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return driver.Grant{}, fmt.Errorf("redislease: acquire %q: fence: %w: %w", r.Key, lease.ErrCorrupt, err)
		}
		return driver.Grant{Fence: fence}, nil
	}
	f, err := fields(v, 5)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("redislease: acquire %q: %w", r.Key, err)
	}
	if f[0] == "-1" {
		return driver.Grant{}, fmt.Errorf("redislease: acquire %q: %w", r.Key, &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters})
	}
	return driver.Grant{}, &lease.HeldError{Key: r.Key, Holder: f[1], Remaining: millis(f[2]), Fence: uint64(num(f[3])), Queued: int(num(f[4]))}
}

// Renew runs renew.lua.
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	v, err := s.run(ctx, renewScript, s.renewKeys(r.Key), r.Token, ttlMillis(r.TTL), r.Shared)
	return result("renew", r.Key, v, err)
}

// RenewMany renews up to chunk leases per EVALSHA, all in one pipeline
// (see batch). With WithReplicaAck it renews one request at a time.
func (s *Store) RenewMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	if s.ack.n > 0 {
		for i, r := range rs {
			errs[i] = s.Renew(ctx, r)
		}
		return errs
	}
	vs, verrs := s.batch(ctx, len(rs), batchScripts{
		one: renewScript, many: renewManyScript, keys: len(renewParts), args: 3,
		add: func(keys []string, args []any, i int) ([]string, []any) {
			return s.appendKeys(keys, rs[i].Key, renewParts), append(args, rs[i].Token, ttlMillis(rs[i].TTL), rs[i].Shared)
		},
		send: func(pipe redis.Pipeliner, i int) *redis.Cmd {
			return renewScript.EvalSha(ctx, pipe, s.renewKeys(rs[i].Key), rs[i].Token, ttlMillis(rs[i].TTL), rs[i].Shared)
		},
	})
	for i, r := range rs {
		errs[i] = result("renew", r.Key, vs[i], verrs[i])
	}
	return errs
}

// chunk is the most requests one EVALSHA of a batch runs: Redis runs one
// script at a time, so a chunk delays other clients' commands (1-7 ms for
// 1,000 renewals on a loaded 2-core machine).
const chunk = 1000

// batchScripts says how batch sends a batch's requests: each by script one
// (send), or up to chunk of them by script many, whose arguments are
// common's for the first of them, then each request's keys and arguments
// (add), and whose reply holds one reply per request. Requests go into one
// EVALSHA of many only if same says they may (same nil: any may).
type batchScripts struct {
	one, many  *redis.Script
	keys, args int // per request, in many
	common     func(i int) []any
	same       func(i, j int) bool
	add        func(keys []string, args []any, i int) ([]string, []any)
	send       func(pipe redis.Pipeliner, i int) *redis.Cmd
}

// batch sends requests 0..n-1 in one pipeline and returns each one's reply
// and error. On a single node, one EVALSHA of b.many runs up to chunk
// requests: Redis dispatches one command and calls one script for them
// all. A Cluster or Ring client (a script may not span slots), or a server
// refusing keys of several slots (CROSSSLOT), sends one EVALSHA of b.one
// per request instead, still in one pipeline (per node).
func (s *Store) batch(ctx context.Context, n int, b batchScripts) ([]any, []error) {
	vs, errs := make([]any, n), make([]error, n)
	var each []int // the requests to send by an EVALSHA each
	if _, node := s.client.(*redis.Client); !node {
		each = make([]int, n)
		for i := range each {
			each[i] = i
		}
	} else {
		groups := b.groups(n)
		cmds := s.pipelined(ctx, b.many, len(groups), func(pipe redis.Pipeliner, j int) *redis.Cmd {
			g := groups[j]
			keys, args := make([]string, 0, b.keys*len(g)), make([]any, 0, b.args*len(g)+6) // 6: common's
			if b.common != nil {
				args = append(args, b.common(g[0])...)
			}
			for _, i := range g {
				keys, args = b.add(keys, args, i)
			}
			return b.many.EvalSha(ctx, pipe, keys, args...)
		})
		for j, c := range cmds {
			g := groups[j]
			err := c.Err()
			if err != nil && redis.HasErrorPrefix(err, "CROSSSLOT") {
				each = append(each, g...)
				continue
			}
			rs, _ := c.Val().([]any)
			if err == nil && len(rs) != len(g) {
				err = fmt.Errorf("unexpected script reply %v", c.Val())
			}
			for k, i := range g {
				if errs[i] = err; err == nil {
					vs[i] = rs[k]
					errs[i], _ = vs[i].(error)
				}
			}
		}
	}
	cmds := s.pipelined(ctx, b.one, len(each), func(pipe redis.Pipeliner, j int) *redis.Cmd { return b.send(pipe, each[j]) })
	for j, c := range cmds {
		vs[each[j]], errs[each[j]] = c.Val(), c.Err()
	}
	return vs, errs
}

// groups splits requests 0..n-1 into the EVALSHAs of b.many: requests that
// b.same allows together, up to chunk per EVALSHA, in order within each.
func (b batchScripts) groups(n int) [][]int {
	var groups [][]int
	var open []int // the groups still taking requests
next:
	for i := range n {
		for k, g := range open {
			if b.same == nil || b.same(groups[g][0], i) {
				if groups[g] = append(groups[g], i); len(groups[g]) == chunk {
					open = slices.Delete(open, k, k+1)
				}
				continue next
			}
		}
		open = append(open, len(groups))
		groups = append(groups, append(make([]int, 0, min(n-i, chunk)), i))
	}
	return groups
}

// pipelined sends send(pipe, i) for each i < n in one pipeline. If Redis
// lost script (an empty script cache), it loads it and sends again the
// commands Redis refused (NOSCRIPT), which did not run.
func (s *Store) pipelined(ctx context.Context, script *redis.Script, n int, send func(redis.Pipeliner, int) *redis.Cmd) []*redis.Cmd {
	if n == 0 {
		return nil
	}
	run := func(n int, send func(redis.Pipeliner, int) *redis.Cmd) []*redis.Cmd {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, n)
		for i := range cmds {
			cmds[i] = send(pipe, i)
		}
		_, _ = pipe.Exec(ctx) // each command keeps its own error
		return cmds
	}
	cmds := run(n, func(pipe redis.Pipeliner, i int) *redis.Cmd { return send(pipe, i) })
	var lost []int // the commands Redis did not run
	for i, c := range cmds {
		if isNoScript(c.Err()) {
			lost = append(lost, i)
		}
	}
	if len(lost) > 0 && script.Load(ctx, s.client).Err() == nil {
		again := run(len(lost), func(pipe redis.Pipeliner, j int) *redis.Cmd { return send(pipe, lost[j]) })
		for j, i := range lost {
			cmds[i] = again[j]
		}
	}
	return cmds
}

// Release runs release.lua, which announces the release.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	v, err := s.run(ctx, releaseScript, s.keysOf(r.Key, releaseParts), r.Token, s.channelArg, r.Key, r.Shared)
	return result("release", r.Key, v, err)
}

// ReleaseMany releases up to chunk requests per EVALSHA, all in one
// pipeline (see batch). With WithReplicaAck it releases one request at a
// time.
func (s *Store) ReleaseMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	if s.ack.n > 0 {
		for i, r := range rs {
			errs[i] = s.Release(ctx, r)
		}
		return errs
	}
	vs, verrs := s.batch(ctx, len(rs), batchScripts{
		one: releaseScript, many: releaseManyScript, keys: 1, args: 1,
		common: func(i int) []any { return []any{s.channelArg, len(s.prefix), rs[i].Shared} },
		same:   func(i, j int) bool { return rs[i].Shared == rs[j].Shared },
		add: func(keys []string, args []any, i int) ([]string, []any) {
			return append(keys, s.leaseKey(rs[i].Key)), append(args, rs[i].Token)
		},
		send: func(pipe redis.Pipeliner, i int) *redis.Cmd {
			return releaseScript.EvalSha(ctx, pipe, s.keysOf(rs[i].Key, releaseParts), rs[i].Token, s.channelArg, rs[i].Key, rs[i].Shared)
		},
	})
	for i, r := range rs {
		errs[i] = result("release", r.Key, vs[i], verrs[i])
	}
	return errs
}

// Inspect runs inspect.lua. A free key's Fence is the last one granted.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	lk := s.leaseKey(key)
	v, err := inspectScript.Run(ctx, s.client, []string{lk, lk + ":fence", lk + ":r"}).Result()
	var f []string
	if err == nil {
		f, err = fields(v, 5)
	}
	if err = corrupt(err); err != nil {
		return driver.Info{}, fmt.Errorf("redislease: inspect %q: %w", key, err)
	}
	readers := int(num(f[4]))
	return driver.Info{Key: key, Held: f[0] == "1", Holder: f[1], Fence: uint64(num(f[2])), Remaining: millis(f[3]),
		Shared: readers > 0, Readers: readers}, nil
}

// result is the error of a renewal or release whose script replied v (-1:
// the token's hold was broken).
func result(op, key string, v any, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("redislease: %s %q: %w", op, key, corrupt(err))
	case v == int64(-1):
		return fmt.Errorf("redislease: %s %q: %w", op, key, lease.ErrBroken)
	case v != int64(1):
		return fmt.Errorf("redislease: %s %q: %w", op, key, lease.ErrNotHeld)
	}
	return nil
}

// corrupt wraps lease.ErrCorrupt into the error of data we did not write
// under our keys: a script's CORRUPT error, or WRONGTYPE for a key of
// another type.
func corrupt(err error) error {
	if err == nil { // HasErrorPrefix allocates
		return nil
	}
	if redis.HasErrorPrefix(err, "CORRUPT") || redis.HasErrorPrefix(err, "WRONGTYPE") {
		return fmt.Errorf("%w: %w", lease.ErrCorrupt, err)
	}
	return err
}

// fields reads a script's table reply of n strings or integers.
func fields(v any, n int) ([]string, error) {
	res, ok := v.([]any)
	if !ok || len(res) != n {
		return nil, fmt.Errorf("unexpected script reply %v", v)
	}
	f := make([]string, n)
	for i, x := range res {
		f[i] = fmt.Sprint(x)
	}
	return f, nil
}

// num parses a number of a script reply; our scripts write only numbers.
func num(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// millis converts a PTTL reply; negative values (no key) become 0.
func millis(ms string) time.Duration { return time.Duration(max(num(ms), 0)) * time.Millisecond }

// ttlMillis rounds d up to whole milliseconds, as PEXPIRE takes them.
func ttlMillis(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
