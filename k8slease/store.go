package k8slease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	leasesv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// MinTTL is the shortest TTL the store accepts: a Lease's duration is
// whole seconds, and an apiserver write takes milliseconds to tens of them.
const MinTTL = time.Second

// MaxKeyLen is the longest key: it is kept whole in an annotation.
const MaxKeyLen = 1024

// The annotations and the labels the store keeps on its Lease objects:
// a key's, and each waiter's (see the package doc).
const (
	annKey    = "leasekit.io/key"    // the key, whole
	annFence  = "leasekit.io/fence"  // the last fence granted, decimal
	annToken  = "leasekit.io/token"  // the holder's token; absent: free
	annTTL    = "leasekit.io/ttl-ms" // the hold's TTL in milliseconds
	annBroken = "leasekit.io/broken" // "TOKEN UNTIL-UNIX-MS": Break's tombstone
	labStore  = "leasekit.io/store"  // the prefix's digest, for List and watches
	annTicket = "leasekit.io/ticket" // a waiter's place: its object's first resourceVersion
	annNext   = "leasekit.io/next"   // on a key freed: its head waiter's token then
	labQueue  = "leasekit.io/queue"  // on a waiter: the digest of its key's object name
)

// Store keeps leases in coordination.k8s.io/v1 Lease objects of one
// namespace. It implements driver.Store, driver.Notifier, driver.Lister and
// driver.Breaker, and is safe for concurrent use.
type Store struct {
	leases        leasesv1.LeaseInterface
	prefix, label string
	clock         lease.Clock
	skew          time.Duration // < 0: the wall-clock rule is off

	maxWaiters int

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
	s := &Store{seen: make(map[string]sighting), skew: DefaultMaxClockSkew, maxWaiters: driver.DefaultMaxWaiters}
	for _, o := range opts {
		o(s)
	}
	s.clock = cmp.Or(s.clock, lease.SystemClock())
	err := checkPrefix(s.prefix)
	if s.maxWaiters < 1 || s.maxWaiters > driver.MaxMaxWaiters {
		err = lease.Invalid("max_waiters", "%d is not between 1 and %d", s.maxWaiters, driver.MaxMaxWaiters)
	}
	if cs == nil || namespace == "" {
		err = lease.Invalid("namespace", "a client and a namespace are needed")
	}
	if err != nil {
		return nil, fmt.Errorf("k8slease: %w", err)
	}
	s.leases, s.label = cs.Leases(namespace), digest(s.prefix)
	return s, nil
}

// Prefix returns the store's object name prefix.
func (s *Store) Prefix() string { return s.prefix }

// Caps declares the store's limits: FIFO, no shared holds.
func (s *Store) Caps() driver.Caps {
	return driver.Caps{MinTTL: MinTTL, MaxTTL: math.MaxInt32 * time.Second, MaxKeyLen: MaxKeyLen, FIFO: true, MaxWaiters: s.maxWaiters}
}

// Close forgets the store's sightings.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.seen)
	return nil
}

// Acquire grants r.Key to r.Token if its Lease is free or has not changed
// for its TTL as the store has watched it, and no live waiter is queued
// ahead of r.Token, or refreshes the hold if r.Token has it; else it queues
// r.Token if r.Queue asks. A read, a list of the key's waiters and a
// conditional write (and the delete of r.Token's waiter object when it is
// granted the key).
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	g, err := s.acquire(ctx, r)
	return g, wrap("acquire", r.Key, err)
}

func (s *Store) acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	start := s.clock.Now()
	l, err := s.get(ctx, r.Key)
	if apierrors.IsNotFound(err) {
		l, err = s.newLease(r.Key), nil
	} else if err != nil {
		return driver.Grant{}, err
	}
	var own *coordv1.Lease
	if left, tok := s.remaining(l), l.Annotations[annToken]; left > 0 && tok == r.Token { // a retry: same fence
		s.renew(l, r, start)
	} else { // tok's entry, if any, does not count: tokens are never reused
		var q []driver.Waiter
		if q, own, err = s.queueOf(ctx, r.Key, tok, r.Token); err != nil {
			return driver.Grant{}, err
		}
		ahead := slices.IndexFunc(q, func(w driver.Waiter) bool { return w.Token == r.Token })
		queued := ahead >= 0
		if !queued {
			ahead = len(q)
		}
		if left > 0 || ahead > 0 {
			if r.Queue {
				err = s.enqueue(ctx, r, own, queued, len(q), start)
			}
			return driver.Grant{}, cmp.Or(err, error(s.held(l, r.Key, ahead)))
		}
		s.grant(l, r, start)
	}
	if err := s.raced(ctx, r, s.update(ctx, l, start)); err != nil {
		return driver.Grant{}, err
	}
	if err := s.dequeue(ctx, own); err != nil {
		return driver.Grant{}, err // the Client's retry finds the grant
	}
	return driver.Grant{Fence: fence(l)}, nil
}

// held is the *lease.HeldError of l's key, with queued waiters ahead.
func (s *Store) held(l *coordv1.Lease, key string, queued int) *lease.HeldError {
	he := &lease.HeldError{Key: key, Fence: fence(l), Queued: queued}
	if left := s.remaining(l); left > 0 {
		he.Holder, he.Remaining = ptr.Deref(l.Spec.HolderIdentity, ""), left
	}
	return he
}

// raced turns err, when another client's write to the Lease beat r's,
// into a *lease.HeldError: that client held the key between r's read and
// write. The Lease is read once more for its holder (none if it was
// released meanwhile). Other errors (and nil) stay (transient: the Client
// retries).
func (s *Store) raced(ctx context.Context, r driver.Request, err error) error {
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		return err
	}
	l, gerr := s.get(ctx, r.Key)
	if gerr != nil || l.Annotations[annToken] == r.Token {
		return fmt.Errorf("the Lease changed while it was read (%w)", err)
	}
	return s.held(l, r.Key, 0)
}

// Renew renews r.Token's hold of r.Key for r.TTL; a token whose hold was
// broken gets an error matching lease.ErrBroken.
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	return wrap("renew", r.Key, s.holderOp(ctx, r, s.renew))
}

// wrap says which operation on key failed, if err is not nil.
func wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("k8slease: %s %q: %w", op, key, err)
}

// Release frees r.Key if r.Token holds it, keeping the Lease and its fence
// and naming the head waiter as the next holder, or deletes r.Token's
// waiter object: a list of the key's waiters, a read and a write.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	q, own, err := s.queueOf(ctx, r.Key, r.Token, r.Token)
	if err == nil {
		err = s.holderOp(ctx, r, func(l *coordv1.Lease, _ driver.Request, _ time.Time) { free(l, q) })
	}
	if err == nil { // own: a leftover of the grant's, which expires anyway
		_ = s.dequeue(ctx, own)
	} else if errors.Is(err, lease.ErrNotHeld) {
		err = cmp.Or(s.dequeue(ctx, own), err)
	}
	return wrap("release", r.Key, err)
}

// holderOp reads r.Key's Lease, checks that r.Token holds it, applies op
// and writes it back on the condition that it did not change.
func (s *Store) holderOp(ctx context.Context, r driver.Request, op func(*coordv1.Lease, driver.Request, time.Time)) error {
	start := s.clock.Now()
	l, err := s.get(ctx, r.Key)
	if apierrors.IsNotFound(err) {
		return lease.ErrNotHeld
	} else if err != nil {
		return err
	}
	if s.remaining(l) <= 0 || l.Annotations[annToken] != r.Token {
		if tok, until := tombstone(l); tok == r.Token && time.Now().Before(until) {
			return lease.ErrBroken
		}
		return lease.ErrNotHeld
	}
	op(l, r, start)
	if err = s.update(ctx, l, start); apierrors.IsConflict(err) {
		err = fmt.Errorf("the Lease changed while it was read (%w)", err)
	}
	return err
}

// Inspect reports who holds key, and the last fence granted when nobody
// does.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	l, err := s.get(ctx, key)
	if apierrors.IsNotFound(err) {
		return driver.Info{Key: key}, nil
	} else if err != nil {
		return driver.Info{}, fmt.Errorf("k8slease: inspect %q: %w", key, err)
	}
	he := s.held(l, key, 0)
	return driver.Info{Key: key, Held: he.Remaining > 0, Holder: he.Holder, Fence: he.Fence, Remaining: he.Remaining}, nil
}

// get reads key's Lease and notes the sighting.
func (s *Store) get(ctx context.Context, key string) (*coordv1.Lease, error) {
	l, err := s.leases.Get(ctx, s.name(key), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if l.Annotations[annKey] != key {
		return nil, lease.Invalid("key", "Lease %q belongs to key %q", l.Name, l.Annotations[annKey])
	} else if err := check(l); err != nil {
		return nil, err
	}
	s.saw(l, s.clock.Now())
	return l, nil
}

// check returns an error matching lease.ErrCorrupt if l, a key's object or
// a waiter's, holds what no store writes: a fence or a holder's TTL that is
// no canonical decimal (or the fence MaxInt64, which has no successor), a
// ticket that is no decimal, or a holder without holderIdentity.
func check(l *coordv1.Lease) error {
	a, f, t := l.Annotations, fence(l), ttl(l)
	if strconv.FormatUint(f, 10) != a[annFence] || f >= math.MaxInt64 || strings.Trim(a[annTicket], "0123456789") != "" ||
		a[annToken] != "" && (t <= 0 || strconv.FormatInt(t.Milliseconds(), 10) != a[annTTL] || l.Spec.HolderIdentity == nil) {
		return fmt.Errorf("%w: Lease %q: fence %q, ticket %q, TTL %q ms, holderIdentity %v", lease.ErrCorrupt, l.Name, a[annFence], a[annTicket], a[annTTL], l.Spec.HolderIdentity != nil)
	}
	return nil
}

// update writes l back if its resourceVersion is still the one read, or
// creates it if it has none; a conflict is transient: the Client tries
// again and reads anew.
func (s *Store) update(ctx context.Context, l *coordv1.Lease, start time.Time) (err error) {
	u := l
	if l.ResourceVersion == "" {
		u, err = s.leases.Create(ctx, l, metav1.CreateOptions{FieldManager: manager})
	} else {
		u, err = s.leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: manager})
	}
	if err == nil {
		s.saw(u, start)
	}
	return err
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
	l.Annotations[annFence], l.Annotations[annToken] = strconv.FormatUint(f, 10), r.Token
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

// free clears l's holder, keeping its fence and tombstone, and names the
// head of ws, the live queue, as the waiter whose turn it is.
func free(l *coordv1.Lease, ws []driver.Waiter) {
	l.Annotations[annNext] = ""
	if len(ws) > 0 {
		l.Annotations[annNext] = ws[0].Token
	}
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

// tombstone is the token Break evicted from l and until when Renew says so.
func tombstone(l *coordv1.Lease) (string, time.Time) {
	tok, ms, _ := strings.Cut(l.Annotations[annBroken], " ")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return tok, time.UnixMilli(n)
}

// The FIFO queue of waiters: one small Lease object per waiter.

// WithMaxWaiters caps each key's queue at n live waiters (default
// [driver.DefaultMaxWaiters]); a newcomer beyond it gets a
// *[lease.QueueFullError]. Newcomers that count the queue at the same
// instant may all join it. New refuses n outside 1..[driver.MaxMaxWaiters].
func WithMaxWaiters(n int) Option { return func(s *Store) { s.maxWaiters = n } }

// queueOf lists key's queue: q, its live waiters but holder, head first;
// own, token's waiter object, live or not.
func (s *Store) queueOf(ctx context.Context, key, holder, token string) (q []driver.Waiter, own *coordv1.Lease, err error) {
	ws, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: labQueue + "=" + digest(s.name(key))})
	if err != nil {
		return nil, nil, err
	}
	return s.live(ws.Items, key, holder, token)
}

// live picks key's waiter objects of ws and returns its live waiters but
// holder, head first (the lowest ticket), and token's object, live or not;
// or check's error on one.
func (s *Store) live(ws []coordv1.Lease, key, holder, token string) (q []driver.Waiter, own *coordv1.Lease, err error) {
	slices.SortFunc(ws, func(a, b coordv1.Lease) int { // in place: sorted again, it costs little
		return cmp.Or(cmp.Compare(len(ticket(&a)), len(ticket(&b))), strings.Compare(ticket(&a), ticket(&b)))
	})
	for i, now := 0, s.clock.Now(); i < len(ws); i++ {
		w := &ws[i]
		if w.Annotations[annKey] != key || w.Labels[labQueue] != digest(s.name(key)) {
			continue
		} else if err := check(w); err != nil {
			return nil, nil, err
		}
		s.saw(w, now)
		tok, left := w.Annotations[annToken], s.remaining(w)
		if tok == token {
			own = w
		}
		if tok != holder && left > 0 {
			q = append(q, driver.Waiter{Token: tok, Remaining: left})
		}
	}
	return q, own, nil
}

// ticket is w's place in its queue, a resourceVersion: decimal integers
// that grow with every write, compared by length, then digit by digit (as
// k8s.io/apimachinery/pkg/util/resourceversion does; a guarantee since
// Kubernetes v1.35, KEP-5504).
func ticket(w *coordv1.Lease) string { return cmp.Or(w.Annotations[annTicket], w.ResourceVersion) }

// enqueue writes r's waiter object: own refreshed, keeping its ticket while
// live, or a new one, unless the live queue is full.
func (s *Store) enqueue(ctx context.Context, r driver.Request, own *coordv1.Lease, queued bool, n int, start time.Time) error {
	if !queued && n >= s.maxWaiters {
		return &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters}
	}
	w := own
	if w == nil {
		w = s.newLease(r.Key)
		w.Name, w.Labels[labQueue] = s.waiterName(r), digest(s.name(r.Key))
	}
	t := "" // not queued: a new ticket, its next resourceVersion
	if queued {
		t = ticket(w)
	}
	w.Annotations[annTicket], w.Annotations[annToken] = t, r.Token
	s.renew(w, r, start)
	return s.update(ctx, w, start)
}

// dequeue deletes w, r's waiter object, if any.
func (s *Store) dequeue(ctx context.Context, w *coordv1.Lease) error {
	if w == nil {
		return nil
	}
	return notFoundOK(s.leases.Delete(ctx, w.Name, metav1.DeleteOptions{}))
}

// notFoundOK is err, or nil if it says the object was not found.
func notFoundOK(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Listing keys and breaking leases (driver.Lister, driver.Breaker).

// List lists the store's keys that start with prefix and are held, have
// live waiters or a live tombstone: a page is one apiserver list of limit
// key Lease objects of the store (by its label), cursor the apiserver's
// continue token, and one list of the store's waiter objects.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	ls, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: s.keys(), Limit: int64(max(limit, 1)), Continue: cursor})
	ws := &coordv1.LeaseList{}
	if err == nil {
		ws, err = s.leases.List(ctx, metav1.ListOptions{LabelSelector: labStore + "=" + s.label + "," + labQueue})
	}
	if err != nil {
		return nil, "", fmt.Errorf("k8slease: list %q: %w", prefix, err)
	}
	now := s.clock.Now()
	var page []driver.Entry
	for i := range ls.Items {
		l := &ls.Items[i]
		if key := l.Annotations[annKey]; strings.HasPrefix(key, prefix) && l.Name == s.name(key) && check(l) == nil {
			s.saw(l, now)
			if e := s.entry(l, ws.Items); len(e.Holders)+len(e.Waiters)+len(e.Broken) > 0 {
				page = append(page, e)
			}
		}
	}
	return page, ls.Continue, nil
}

// entry describes l's key, whose waiter objects are ws.
func (s *Store) entry(l *coordv1.Lease, ws []coordv1.Lease) driver.Entry {
	e := driver.Entry{Key: l.Annotations[annKey]}
	tok := ""
	if left := s.remaining(l); left > 0 {
		tok = l.Annotations[annToken]
		e.Holders = []driver.Holder{{Token: tok, Holder: ptr.Deref(l.Spec.HolderIdentity, ""), Fence: fence(l), Remaining: left}}
	}
	e.Waiters, _, _ = s.live(ws, e.Key, tok, "") // none if one is corrupt
	if tok, until := tombstone(l); tok != "" && time.Now().Before(until) {
		e.Broken = []string{tok}
	}
	return e
}

// Break frees key whatever token holds it, keeping its queue, in one
// conditional write (after a read and a list of its waiters) that names the
// head waiter as the next holder and leaves a tombstone naming the evicted
// token until its hold would have expired (by the breaking host's wall
// clock: the tombstone only decides which error the evicted holder's Renew
// gets).
func (s *Store) Break(ctx context.Context, key string) (driver.Entry, error) {
	e, err := s.breakKey(ctx, key)
	return e, wrap("break", key, err)
}

// breakKey is Break, its errors without context.
func (s *Store) breakKey(ctx context.Context, key string) (driver.Entry, error) {
	start := s.clock.Now()
	l, err := s.get(ctx, key)
	if apierrors.IsNotFound(err) {
		return driver.Entry{Key: key}, nil
	}
	ws := &coordv1.LeaseList{}
	if err == nil {
		ws, err = s.leases.List(ctx, metav1.ListOptions{LabelSelector: labQueue + "=" + digest(l.Name)})
	}
	if err != nil {
		return driver.Entry{}, err
	}
	e := s.entry(l, ws.Items)
	if len(e.Holders) == 0 {
		return e, nil
	}
	until := time.Now().Add(e.Holders[0].Remaining + time.Second)
	l.Annotations[annBroken] = e.Holders[0].Token + " " + strconv.FormatInt(until.UnixMilli(), 10)
	free(l, e.Waiters)
	if err := s.update(ctx, l, start); err != nil {
		return driver.Entry{}, err
	}
	return e, nil
}

var _ interface {
	driver.Lister
	driver.Breaker
	driver.Notifier
} = (*Store)(nil)

// keys selects the store's key objects, not its waiters.
func (s *Store) keys() string { return labStore + "=" + s.label + ",!" + labQueue }

// Delete deletes key's Lease object, if any, whatever holds it (not its
// waiter objects, which expire). Fences start over at 1 for a key deleted:
// it is for tests and for operators retiring a key nobody uses, never for a
// key with fenced writes in flight.
func (s *Store) Delete(ctx context.Context, key string) error {
	return wrap("delete", key, notFoundOK(s.leases.Delete(ctx, s.name(key), metav1.DeleteOptions{})))
}

// Release announcements from a watch of the store's Lease objects
// (driver.Notifier).

// ErrWatchEnded is returned (wrapped) by Next when the apiserver ended the
// watch (it does so every few minutes): the Client subscribes again.
var ErrWatchEnded = errors.New("k8slease: watch ended")

// Subscribe watches the store's key Lease objects (not its waiters') from
// the current resourceVersion: each change that leaves one free (Release,
// Break) is an announcement, naming the head waiter the change wrote as
// Next. client-go's watch reader is the subscription's goroutine.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	ls, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: s.keys(), Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("k8slease: subscribe: %w", err)
	}
	w, err := s.leases.Watch(ctx, metav1.ListOptions{LabelSelector: s.keys(), ResourceVersion: ls.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("k8slease: subscribe: %w", err)
	}
	return &subscription{w: w}, nil
}

// subscription is a driver.Subscription over one watch.
type subscription struct{ w watch.Interface }

// Next returns the next key its Lease shows free.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	for {
		select {
		case ev, open := <-sub.w.ResultChan():
			if !open || ev.Type == watch.Error { // the closed channel's zero event has no Object
				return driver.Announcement{}, fmt.Errorf("k8slease: next: %w (%v)", ErrWatchEnded, ev.Object)
			}
			l, ok := ev.Object.(*coordv1.Lease)
			if ok && (ev.Type == watch.Deleted || l.Annotations[annToken] == "") && l.Annotations[annKey] != "" {
				return driver.Announcement{Key: l.Annotations[annKey], Next: l.Annotations[annNext]}, nil
			}
		case <-ctx.Done():
			return driver.Announcement{}, fmt.Errorf("k8slease: next: %w", ctx.Err())
		}
	}
}

// Close stops the watch and unblocks Next.
func (sub *subscription) Close() error {
	sub.w.Stop()
	return nil
}
