// The Store: construction, the key record and the driver.Store operations.

package natslease

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// DefaultBucket is the KV bucket of a Store made without [WithBucket].
const DefaultBucket = "leasekit"

// DefaultNamespace is the key namespace of a Store made without
// [WithNamespace].
const DefaultNamespace = "lease"

// clockKey is the KV key the store writes to read the server's clock; lease
// keys have two tokens, so it is nobody's.
const clockKey = "_clock"

// Store is a [driver.Store] on a NATS JetStream key-value bucket; it is also
// a [driver.Notifier], a [driver.Lister] and a [driver.Breaker]. It is safe
// for concurrent use and never closes the connection it was given.
type Store struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
	ns     string
}

var (
	_ driver.Store    = (*Store)(nil)
	_ driver.Notifier = (*Store)(nil)
	_ driver.Lister   = (*Store)(nil)
	_ driver.Breaker  = (*Store)(nil)
)

// Option configures a Store made by [New].
type Option func(*config)

type config struct{ bucket, ns string }

// WithBucket sets the KV bucket (default [DefaultBucket]); New creates it if
// it is missing.
func WithBucket(name string) Option { return func(c *config) { c.bucket = name } }

// WithNamespace sets the first token of the store's KV keys (default
// [DefaultNamespace]): stores of different namespaces share a bucket
// without sharing a lease.
func WithNamespace(ns string) Option { return func(c *config) { c.ns = ns } }

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// New returns a Store over the bucket of js, which it creates (one
// revision per key, on disk) if it does not exist.
func New(ctx context.Context, js jetstream.JetStream, opts ...Option) (*Store, error) {
	cfg := config{bucket: DefaultBucket, ns: DefaultNamespace}
	for _, o := range opts {
		if o == nil {
			return nil, lease.Invalid("option", "nil option")
		}
		o(&cfg)
	}
	switch {
	case js == nil:
		return nil, lease.Invalid("jetstream", "nil")
	case !nameRe.MatchString(cfg.bucket):
		return nil, lease.Invalid("bucket", "%q is not a bucket name (letters, digits, - and _)", cfg.bucket)
	case !nameRe.MatchString(cfg.ns):
		return nil, lease.Invalid("namespace", "%q is not one KV token (letters, digits, - and _)", cfg.ns)
	}
	kv, err := js.KeyValue(ctx, cfg.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cfg.bucket, History: 1, Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, cfg.bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natslease: bucket %q: %w", cfg.bucket, err)
	}
	stream, err := js.Stream(ctx, "KV_"+cfg.bucket)
	if err != nil {
		return nil, fmt.Errorf("natslease: bucket %q: %w", cfg.bucket, err)
	}
	return &Store{kv: kv, stream: stream, ns: cfg.ns}, nil
}

// Caps declares no FIFO queue and no shared holds; TTLs and keys are the
// Client's defaults.
func (s *Store) Caps() driver.Caps { return driver.Caps{} }

// Close does nothing: the connection is the caller's.
func (s *Store) Close() error { return nil }

// record is a key's value: its holder, or none, and the tombstones of the
// holds a Break evicted.
type record struct {
	Token  string        `json:"t,omitempty"`
	Holder string        `json:"h,omitempty"`
	TTL    time.Duration `json:"ttl,omitempty"`
	Fence  uint64        `json:"f,omitempty"` // 0: the revision that wrote the record
	Broken []tombstone   `json:"b,omitempty"`
}

// tombstone is an evicted token and the server time until which it lives.
type tombstone struct {
	Token string `json:"t"`
	Until int64  `json:"u"` // Unix nanoseconds
}

// state is a key as read: its record, the revision that wrote it (0: the
// key has no value) and the server time of that write.
type state struct {
	record
	rev     uint64
	created time.Time
}

// fence is the fence of the record's holder.
func (st state) fence() uint64 {
	if st.Fence != 0 {
		return st.Fence
	}
	return st.rev
}

// expires is when the record's hold ends, by the server's clock.
func (st state) expires() time.Time { return st.created.Add(st.TTL) }

// live reports whether the record has a holder at the server time now.
func (st state) live(now time.Time) bool { return st.Token != "" && now.Before(st.expires()) }

// broken returns the tombstones still live at the server time now.
func (st state) broken(now time.Time) []tombstone {
	var live []tombstone
	for _, b := range st.Broken {
		if b.Until > now.UnixNano() {
			live = append(live, b)
		}
	}
	return live
}

// get reads key's state. It reads the stream's last message of the key,
// not the KV entry, to learn the revision of a delete marker too: a write
// over it is then one Update.
func (s *Store) get(ctx context.Context, key string) (state, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.subject(s.kvKey(key)))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return state{}, nil
	case err != nil:
		return state{}, err
	case m.Header.Get(kvOperation) != "": // deleted: free
		return state{rev: m.Sequence, created: m.Time}, nil
	}
	return decode(m.Data, m.Sequence, m.Time)
}

// decode parses a record written at revision rev and time created; a
// value this package did not write is an error matching lease.ErrCorrupt.
func decode(value []byte, rev uint64, created time.Time) (state, error) {
	st := state{rev: rev, created: created}
	err := json.Unmarshal(value, &st.record)
	if err == nil && (st.TTL < 0 || st.Token != "" && st.TTL == 0) {
		err = fmt.Errorf("a holder with TTL %v", st.TTL)
	}
	if err != nil {
		return state{}, fmt.Errorf("%w: revision %d is not a lease record: %w", lease.ErrCorrupt, rev, err)
	}
	return st, nil
}

// put writes rec over the state of revision rev (0: a key with no value)
// and returns the new revision; errConflict if the key changed since.
func (s *Store) put(ctx context.Context, key string, rev uint64, rec record) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		rev, err = s.kv.Create(ctx, s.kvKey(key), b)
	} else {
		rev, err = s.kv.Update(ctx, s.kvKey(key), b, rev)
	}
	return rev, conflict(err)
}

// errConflict says a key changed between the read and the write.
var errConflict = errors.New("the key changed during the operation")

// conflict turns a failed compare-and-set into errConflict.
func conflict(err error) error {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return errConflict
	}
	return err
}

// now reads the server's clock: it writes the clock key and reads the time
// the server stamped on that write, or on a later one.
func (s *Store) now(ctx context.Context) (time.Time, error) {
	rev, err := s.kv.Put(ctx, clockKey, nil)
	if err != nil {
		return time.Time{}, err
	}
	e, err := s.kv.Get(ctx, clockKey)
	if err != nil {
		return time.Time{}, err
	}
	if e.Revision() < rev {
		return time.Time{}, fmt.Errorf("the clock key read back at revision %d, before its write %d", e.Revision(), rev)
	}
	return e.Created(), nil
}

// getNow reads key's state and then the server's clock.
func (s *Store) getNow(ctx context.Context, key string) (state, time.Time, error) {
	st, err := s.get(ctx, key)
	if err != nil {
		return state{}, time.Time{}, err
	}
	now, err := s.now(ctx)
	return st, now, err
}

// Acquire grants r.Key to r.Token if it has no live holder, or refreshes
// the hold of r.Token; otherwise it returns a *lease.HeldError.
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	g, err := s.acquire(ctx, r)
	if err != nil && !errors.Is(err, lease.ErrHeld) {
		return g, fmt.Errorf("natslease: acquire %q: %w", r.Key, err)
	}
	return g, err
}

func (s *Store) acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	st, err := s.get(ctx, r.Key)
	if err != nil {
		return driver.Grant{}, err
	}
	now := st.created // a free record needs no clock: its tombstones are pruned conservatively
	if st.Token != "" {
		if now, err = s.now(ctx); err != nil {
			return driver.Grant{}, err
		}
	}
	rec := record{Token: r.Token, Holder: r.Holder, TTL: r.TTL, Broken: st.broken(now)}
	switch {
	case st.live(now) && st.Token == r.Token: // a retried Acquire: same fence, new TTL
		rec.Fence = st.fence()
	case st.live(now):
		return driver.Grant{}, &lease.HeldError{Key: r.Key, Holder: st.Holder, Fence: st.fence(), Remaining: st.expires().Sub(now)}
	}
	rev, err := s.put(ctx, r.Key, st.rev, rec)
	if errors.Is(err, errConflict) { // another client wrote the key first
		return driver.Grant{}, &lease.HeldError{Key: r.Key}
	}
	if rec.Fence == 0 {
		rec.Fence = rev
	}
	return driver.Grant{Fence: rec.Fence}, err
}

// Renew extends r.Token's hold of r.Key to r.TTL from now.
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	st, now, err := s.getNow(ctx, r.Key)
	if err != nil {
		return fmt.Errorf("natslease: renew %q: %w", r.Key, err)
	}
	if st.Token != r.Token || !st.live(now) {
		return notHeld("renew", r, st, now)
	}
	rec := record{Token: r.Token, Holder: st.Holder, TTL: r.TTL, Fence: st.fence(), Broken: st.broken(now)}
	if _, err = s.put(ctx, r.Key, st.rev, rec); errors.Is(err, errConflict) {
		// Broken or taken meanwhile, or (still ours) a transient race.
		if st, now, err = s.getNow(ctx, r.Key); err == nil && (st.Token != r.Token || !st.live(now)) {
			return notHeld("renew", r, st, now)
		}
		err = cmp.Or(err, errConflict)
	}
	if err != nil {
		return fmt.Errorf("natslease: renew %q: %w", r.Key, err)
	}
	return nil
}

// notHeld is the error for r.Token, which does not hold r.Key: ErrBroken
// while a tombstone names it.
func notHeld(op string, r driver.Request, st state, now time.Time) error {
	for _, b := range st.broken(now) {
		if b.Token == r.Token {
			return fmt.Errorf("natslease: %s %q: %w", op, r.Key, lease.ErrBroken)
		}
	}
	return fmt.Errorf("natslease: %s %q: %w", op, r.Key, lease.ErrNotHeld)
}

// Release frees r.Key if r.Token holds it: it deletes the key, or keeps
// only its live tombstones.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	st, now, err := s.getNow(ctx, r.Key)
	if err == nil && (st.Token != r.Token || !st.live(now)) {
		err = lease.ErrNotHeld
	}
	if err == nil {
		if tombs := st.broken(now); len(tombs) > 0 {
			_, err = s.put(ctx, r.Key, st.rev, record{Broken: tombs})
		} else {
			err = conflict(s.kv.Delete(ctx, s.kvKey(r.Key), jetstream.LastRevision(st.rev)))
		}
	}
	if errors.Is(err, errConflict) {
		err = lease.ErrNotHeld
	}
	if err != nil {
		return fmt.Errorf("natslease: release %q: %w", r.Key, err)
	}
	return nil
}

// Inspect reports key's live holder.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	st, now, err := s.getNow(ctx, key)
	if err != nil {
		return driver.Info{}, fmt.Errorf("natslease: inspect %q: %w", key, err)
	}
	if !st.live(now) {
		return driver.Info{Key: key}, nil
	}
	return driver.Info{Key: key, Held: true, Holder: st.Holder, Fence: st.fence(), Remaining: st.expires().Sub(now)}, nil
}
