package k8slease

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	leasesv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// MinTTL is the shortest TTL the store accepts: a Lease's duration is
// whole seconds, and an apiserver write takes milliseconds to tens of them.
const MinTTL = time.Second

// MaxKeyLen is the longest key: it is kept whole in an annotation.
const MaxKeyLen = 1024

// The annotations and the label the store keeps on its Lease objects.
const (
	annKey    = "leasekit.io/key"    // the key, whole
	annFence  = "leasekit.io/fence"  // the last fence granted, decimal
	annToken  = "leasekit.io/token"  // the holder's token; absent: free
	annTTL    = "leasekit.io/ttl-ms" // the hold's TTL in milliseconds
	annBroken = "leasekit.io/broken" // "TOKEN UNTIL-UNIX-MS": Break's tombstone
	labStore  = "leasekit.io/store"  // the prefix's digest, for List and watches
)

// Store keeps leases in coordination.k8s.io/v1 Lease objects of one
// namespace. It implements driver.Store, driver.Notifier, driver.Lister and
// driver.Breaker, and is safe for concurrent use.
type Store struct {
	leases leasesv1.LeaseInterface
	prefix string
	label  string
	clock  lease.Clock
	skew   time.Duration // < 0: the wall-clock rule is off

	mu   sync.Mutex
	seen map[string]sighting // by object name
}

// sighting is when the store first saw a Lease object's resourceVersion,
// by its own clock (the time before sending, for its own writes).
type sighting struct {
	rv string
	at time.Time
}

// maxSeen bounds the store's memory of sightings: past it, it forgets
// them all, so the leases it sees next count from then (later, never
// earlier, than they expire).
const maxSeen = 1 << 16

// Option configures a Store made by [New].
type Option func(*Store)

// WithPrefix starts the name of every Lease object of the store with
// prefix (default ""), so that many stores share a namespace apart. It
// must be empty or lowercase letters, digits, '-' and '.', at most 100
// bytes.
func WithPrefix(prefix string) Option { return func(s *Store) { s.prefix = prefix } }

// WithClock sets the clock by which the store measures how long it has
// seen a Lease unchanged and reads the wall time (default, or if c is nil:
// [lease.SystemClock]).
func WithClock(c lease.Clock) Option { return func(s *Store) { s.clock = c } }

// DefaultMaxClockSkew is the default of [WithMaxClockSkew].
const DefaultMaxClockSkew = 250 * time.Millisecond

// WithMaxClockSkew sets how far apart the wall clocks of the hosts sharing
// the Leases may be (default [DefaultMaxClockSkew]): a Lease the store has
// not watched for its TTL expires once its renewTime + TTL + d is past by
// this host's wall clock. A negative d turns that rule off, leaving
// client-go leader election's alone (see the package doc).
func WithMaxClockSkew(d time.Duration) Option { return func(s *Store) { s.skew = d } }

// New returns a store over the Lease objects of namespace, through cs:
// a clientset's CoordinationV1(), or leasesv1.NewForConfig's client alone
// (a smaller binary than the whole clientset). Nothing needs closing.
func New(cs leasesv1.LeasesGetter, namespace string, opts ...Option) (*Store, error) {
	s := &Store{seen: make(map[string]sighting), skew: DefaultMaxClockSkew}
	for _, o := range opts {
		o(s)
	}
	if s.clock == nil {
		s.clock = lease.SystemClock()
	}
	if err := checkPrefix(s.prefix); err != nil {
		return nil, fmt.Errorf("k8slease: %w", err)
	}
	if cs == nil || namespace == "" {
		return nil, fmt.Errorf("k8slease: %w", lease.Invalid("namespace", "a client and a namespace are needed"))
	}
	s.leases, s.label = cs.Leases(namespace), digest(s.prefix)
	return s, nil
}

// Prefix returns the store's object name prefix.
func (s *Store) Prefix() string { return s.prefix }

// Caps declares the store's limits: no FIFO, no shared holds.
func (s *Store) Caps() driver.Caps {
	return driver.Caps{MinTTL: MinTTL, MaxTTL: math.MaxInt32 * time.Second, MaxKeyLen: MaxKeyLen}
}

// Close forgets the store's sightings.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.seen)
	return nil
}

// Acquire grants r.Key to r.Token if its Lease is free or has not changed
// for its TTL as the store has watched it, or refreshes the hold if
// r.Token has it; one read and one conditional write.
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	g, err := s.acquire(ctx, r)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("k8slease: acquire %q: %w", r.Key, err)
	}
	return g, nil
}

func (s *Store) acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	start := s.clock.Now()
	l, err := s.get(ctx, r.Key)
	if apierrors.IsNotFound(err) {
		l = s.newLease(r.Key)
		s.grant(l, r, start)
		l, err = s.leases.Create(ctx, l, metav1.CreateOptions{FieldManager: manager})
		if err != nil {
			return driver.Grant{}, s.raced(ctx, r, err)
		}
		s.saw(l, start)
		return driver.Grant{Fence: fence(l)}, nil
	}
	if err != nil {
		return driver.Grant{}, err
	}
	left := s.remaining(l)
	switch {
	case left > 0 && l.Annotations[annToken] == r.Token: // a retry: same fence
		s.renew(l, r, start)
	case left > 0:
		return driver.Grant{}, &lease.HeldError{Key: r.Key, Holder: holder(l), Fence: fence(l), Remaining: left}
	default:
		s.grant(l, r, start)
	}
	if err := s.update(ctx, l, start); err != nil {
		return driver.Grant{}, s.raced(ctx, r, err)
	}
	return driver.Grant{Fence: fence(l)}, nil
}

// raced turns err, when another client's write to the Lease beat r's,
// into a *lease.HeldError: that client held the key between r's read and
// write. The Lease is read once more for its holder (none if it was
// released meanwhile). Other errors stay (transient: the Client retries).
func (s *Store) raced(ctx context.Context, r driver.Request, err error) error {
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		return err
	}
	l, gerr := s.get(ctx, r.Key)
	if gerr != nil || l.Annotations[annToken] == r.Token {
		return fmt.Errorf("the Lease changed while it was read (%w)", err)
	}
	he := &lease.HeldError{Key: r.Key, Fence: fence(l)}
	if left := s.remaining(l); left > 0 {
		he.Holder, he.Remaining = holder(l), left
	}
	return he
}

// Renew renews r.Token's hold of r.Key for r.TTL; a token whose hold was
// broken gets an error matching lease.ErrBroken.
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	if err := s.holderOp(ctx, r, s.renew); err != nil {
		return fmt.Errorf("k8slease: renew %q: %w", r.Key, err)
	}
	return nil
}

// Release frees r.Key if r.Token holds it, keeping the Lease and its fence.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	if err := s.holderOp(ctx, r, func(l *coordv1.Lease, _ driver.Request, _ time.Time) { free(l) }); err != nil {
		return fmt.Errorf("k8slease: release %q: %w", r.Key, err)
	}
	return nil
}

// holderOp reads r.Key's Lease, checks that r.Token holds it, applies op
// and writes it back on the condition that it did not change.
func (s *Store) holderOp(ctx context.Context, r driver.Request, op func(*coordv1.Lease, driver.Request, time.Time)) error {
	start := s.clock.Now()
	l, err := s.get(ctx, r.Key)
	if apierrors.IsNotFound(err) {
		return lease.ErrNotHeld
	}
	if err != nil {
		return err
	}
	if s.remaining(l) <= 0 || l.Annotations[annToken] != r.Token {
		if tok, until := tombstone(l); tok == r.Token && time.Now().Before(until) {
			return lease.ErrBroken
		}
		return lease.ErrNotHeld
	}
	op(l, r, start)
	if err := s.update(ctx, l, start); apierrors.IsConflict(err) {
		return fmt.Errorf("the Lease changed while it was read (%w)", err)
	} else if err != nil {
		return err
	}
	return nil
}

// Inspect reports who holds key, and the last fence granted when nobody
// does.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	l, err := s.get(ctx, key)
	if apierrors.IsNotFound(err) {
		return driver.Info{Key: key}, nil
	}
	if err != nil {
		return driver.Info{}, fmt.Errorf("k8slease: inspect %q: %w", key, err)
	}
	info := driver.Info{Key: key, Fence: fence(l)}
	if left := s.remaining(l); left > 0 {
		info.Held, info.Holder, info.Remaining = true, holder(l), left
	}
	return info, nil
}

// get reads key's Lease and notes the sighting.
func (s *Store) get(ctx context.Context, key string) (*coordv1.Lease, error) {
	l, err := s.leases.Get(ctx, s.name(key), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if l.Annotations[annKey] != key {
		return nil, lease.Invalid("key", "Lease %q belongs to key %q", l.Name, l.Annotations[annKey])
	}
	s.saw(l, s.clock.Now())
	return l, nil
}

// update writes l back if its resourceVersion is still the one read; a
// conflict is transient: the Client tries again and reads anew.
func (s *Store) update(ctx context.Context, l *coordv1.Lease, start time.Time) error {
	u, err := s.leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: manager})
	if err != nil {
		return err
	}
	s.saw(u, start)
	return nil
}

// manager is the field manager of the store's writes.
const manager = "leasekit"

// saw notes that the store saw l at at, unless it saw its resourceVersion
// earlier.
func (s *Store) saw(l *coordv1.Lease, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[l.Name].rv == l.ResourceVersion {
		return
	}
	if len(s.seen) >= maxSeen {
		clear(s.seen)
	}
	s.seen[l.Name] = sighting{rv: l.ResourceVersion, at: at}
}

// remaining is the time left of l's hold as the store judges it (see the
// package doc): its TTL less how long the store has seen l unchanged, or,
// if sooner, until renewTime + TTL + skew by the wall clock; 0 when free
// or expired.
func (s *Store) remaining(l *coordv1.Lease) time.Duration {
	if l.Annotations[annToken] == "" {
		return 0
	}
	s.mu.Lock()
	at := s.seen[l.Name].at
	s.mu.Unlock()
	now := s.clock.Now()
	left := ttl(l) - now.Sub(at)
	if rt := l.Spec.RenewTime; s.skew >= 0 && rt != nil {
		left = min(left, rt.Add(ttl(l)+s.skew).Sub(now.Round(0)))
	}
	return max(left, 0)
}

// newLease returns a free Lease for key, fence 0.
func (s *Store) newLease(key string) *coordv1.Lease {
	return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name:        s.name(key),
		Labels:      map[string]string{labStore: s.label},
		Annotations: map[string]string{annKey: key, annFence: "0"},
	}}
}

// grant gives l to r with the next fence.
func (s *Store) grant(l *coordv1.Lease, r driver.Request, now time.Time) {
	f := fence(l) + 1
	l.Annotations[annFence] = strconv.FormatUint(f, 10)
	l.Annotations[annToken] = r.Token
	t := metav1.NewMicroTime(now)
	n := int32(min(f, math.MaxInt32))
	l.Spec.AcquireTime, l.Spec.LeaseTransitions = &t, &n
	s.renew(l, r, now)
}

// renew sets l's holder, TTL and renewal time from r.
func (s *Store) renew(l *coordv1.Lease, r driver.Request, now time.Time) {
	h, secs, t := r.Holder, int32(min((r.TTL+time.Second-1)/time.Second, math.MaxInt32)), metav1.NewMicroTime(now)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &h, &secs, &t
	l.Annotations[annTTL] = strconv.FormatInt(r.TTL.Milliseconds(), 10)
}

// free clears l's holder, keeping its fence and tombstone.
func free(l *coordv1.Lease) {
	delete(l.Annotations, annToken)
	delete(l.Annotations, annTTL)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = nil, nil, nil, nil
}

// fence is the last fence granted on l.
func fence(l *coordv1.Lease) uint64 {
	f, _ := strconv.ParseUint(l.Annotations[annFence], 10, 64)
	return f
}

// ttl is l's hold's TTL.
func ttl(l *coordv1.Lease) time.Duration {
	ms, _ := strconv.ParseInt(l.Annotations[annTTL], 10, 64)
	return time.Duration(ms) * time.Millisecond
}

// holder is l's holder identity.
func holder(l *coordv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// tombstone is the token Break evicted from l and until when Renew says so.
func tombstone(l *coordv1.Lease) (string, time.Time) {
	var tok string
	var ms int64
	if _, err := fmt.Sscanf(l.Annotations[annBroken], "%s %d", &tok, &ms); err != nil {
		return "", time.Time{}
	}
	return tok, time.UnixMilli(ms)
}
