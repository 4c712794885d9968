// Counting semaphores (at most n holders of a key) built from n ordinary
// leases, the slots: AcquireSemaphore, TrySemaphore and the mixed-n check.

package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// SlotKey returns the lease key of slot i (from 0) of semaphore key.
func SlotKey(key string, i int) string { return key + "#sem" + strconv.Itoa(i) }

// semTag is stored after the holder of a slot lease; it tells other clients
// the semaphore's n.
func semTag(n int) string { return " [sem n=" + strconv.Itoa(n) + "]" }

// semN parses the n out of a slot holder's annotation; ok is false when the
// holder carries none (a plain lease, or a store that does not keep holders).
func semN(holder string) (n int, ok bool) {
	i := strings.LastIndex(holder, " [sem n=")
	if i < 0 || !strings.HasSuffix(holder, "]") {
		return 0, false
	}
	n, err := strconv.Atoi(holder[i+len(" [sem n=") : len(holder)-1])
	return n, err == nil
}

// semaphore is one acquisition of a semaphore.
type semaphore struct {
	c     *Client
	key   string
	n     int
	p     params
	slots []string // the slot keys, 0..n-1
}

func (c *Client) newSemaphore(key string, n int, opts []AcquireOption) (*semaphore, error) {
	if n < 1 {
		return nil, &InvalidError{Field: "semaphore n", Reason: fmt.Sprintf("%d; want at least 1", n)}
	}
	if err := c.validKey(key); err != nil {
		return nil, err
	}
	// The longest key used is slot n, which is inspected to detect holders
	// with a larger n.
	if err := c.validKey(SlotKey(key, n)); err != nil {
		return nil, fmt.Errorf("semaphore %q with n=%d: slot keys are too long: %w", key, n, err)
	}
	p, err := c.prepare(SlotKey(key, 0), opts)
	if err != nil {
		return nil, err
	}
	p.tag = semTag(n)
	if len(p.holder)+len(p.tag) > MaxHolderLen {
		err := Invalid("holder", "%d bytes, longer than %d", len(p.holder)+len(p.tag), MaxHolderLen)
		return nil, fmt.Errorf("semaphore %q: the holder with its tag %q: %w", key, p.tag, err)
	}
	s := &semaphore{c: c, key: key, n: n, p: p, slots: make([]string, n)}
	for i := range s.slots {
		s.slots[i] = SlotKey(key, i)
	}
	return s, nil
}

// AcquireSemaphore acquires one of the n slots of the semaphore key, waiting
// while all n are held, until ctx ends or the Client is closed. At most n
// holders hold the semaphore at a time, across all clients that use the same
// key and n.
//
// The returned *Lease is an ordinary lease on the slot's key (SlotKey(key, i)),
// with its own heartbeat, loss signal and fence; Release frees the slot, and
// a crashed holder's slot frees after its TTL. The fence is per slot: it
// strictly increases across the holders of that slot, not across the whole
// semaphore, so a resource protected by the semaphore must track fences per
// slot key.
//
// n must be at least 1, and every client must use the same n for a key: a
// slot held with a different n, or a holder of slot n (beyond this client's
// range), makes AcquireSemaphore fail with an *InvalidError (matching
// ErrInvalid). The check is best effort: it sees only the slots it looks at
// while they are held, and relies on the store keeping holders.
//
// Waiting registers for the release announcements of all n slots (when the
// store is a Notifier) and otherwise sleeps until the earliest expiry among
// the held slots. When ctx ends, the error is a *HeldError for key matching
// ctx's error too, as Acquire's. Slots this Client holds count as held: it
// may hold several slots, and waits for one while it holds all n.
func (c *Client) AcquireSemaphore(ctx context.Context, key string, n int, opts ...AcquireOption) (*Lease, error) {
	s, err := c.newSemaphore(key, n, opts)
	if err != nil {
		return nil, err
	}
	start := c.clock.Now()
	l, err := s.acquire(ctx, start)
	if err != nil {
		return nil, c.failed(key, s.p, start, err)
	}
	return l, nil
}

// acquire is AcquireSemaphore's loop.
func (s *semaphore) acquire(ctx context.Context, start time.Time) (*Lease, error) {
	c, key := s.c, s.key
	w := c.hub.register("", s.slots...)
	defer c.hub.unregister(w)
	var transient int
	var last *HeldError // the last refusal, for the error when ctx ends
	for {
		gen := c.hub.ensure(ctx)
		l, remaining, err := s.try(ctx, start)
		if err == nil {
			return l, nil
		}
		var sleep time.Duration
		switch {
		case errors.Is(err, ErrHeld):
			transient = 0
			if !errors.As(err, &last) {
				last = &HeldError{}
			}
			sleep = waitFor(remaining, s.p, true) // semaphore waiters race for the slots
		case ctx.Err() != nil:
			return nil, c.gaveUp(key, last, start, ctx.Err())
		case errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed):
			return nil, err
		default:
			transient++
			sleep = backoff(transient, s.p.renew)
			c.log.Warn("lease: semaphore acquire failed, retrying", "key", key, "err", err, "retry_in", sleep)
		}
		if c.hub.changed(gen) {
			continue
		}
		if err := c.pause(ctx, sleep, w); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, fmt.Errorf("lease: acquire semaphore %q: %w", key, err)
			}
			return nil, c.gaveUp(key, last, start, err)
		}
	}
}

// TrySemaphore acquires one of the n slots of the semaphore key if one is
// free, and returns at once otherwise with an error matching ErrHeld (a
// *HeldError for key whose Remaining is the earliest expiry among the slots,
// when the store tells). See AcquireSemaphore.
func (c *Client) TrySemaphore(ctx context.Context, key string, n int, opts ...AcquireOption) (*Lease, error) {
	s, err := c.newSemaphore(key, n, opts)
	if err != nil {
		return nil, err
	}
	start := c.clock.Now()
	l, _, err := s.try(ctx, start)
	if err != nil {
		return nil, c.failed(key, s.p, start, err)
	}
	return l, nil
}

// try makes one attempt at every slot, from a random one on, and returns the
// first slot acquired. When all are held, the error matches ErrHeld and
// remaining is the shortest remaining TTL the store reported (0: unknown).
// A transient error on some slot is returned only when no slot was free.
func (s *semaphore) try(ctx context.Context, start time.Time) (*Lease, time.Duration, error) {
	if err := s.checkBeyond(ctx); err != nil {
		return nil, 0, err
	}
	var remaining time.Duration
	var transient error
	first := rand.N(s.n)
	for j := range s.n {
		i := (first + j) % s.n
		l, err := s.c.try(ctx, s.slots[i], s.p, start)
		if err == nil {
			return l, 0, nil
		}
		var held *HeldError
		switch {
		case errors.As(err, &held):
			if m, ok := semN(held.Holder); ok && m != s.n {
				return nil, 0, s.mixed(m, held.Key)
			}
			if held.Remaining > 0 && (remaining == 0 || held.Remaining < remaining) {
				remaining = held.Remaining
			}
		case errors.Is(err, ErrHeld):
		case errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed), ctx.Err() != nil:
			return nil, 0, err
		default:
			transient = err
		}
	}
	if transient != nil {
		return nil, 0, fmt.Errorf("lease: acquire semaphore %q: %w", s.key, transient)
	}
	return nil, remaining, fmt.Errorf("lease: semaphore %q: all %d slots are held: %w", s.key, s.n,
		&HeldError{Key: s.key, Remaining: remaining})
}

// checkBeyond inspects slot n, which no holder with this n uses: a holder
// there uses a larger n.
func (s *semaphore) checkBeyond(ctx context.Context) error {
	beyond := SlotKey(s.key, s.n)
	info, err := s.c.store.Inspect(ctx, beyond)
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("lease: acquire semaphore %q: %w", s.key, ctx.Err())
	case err != nil:
		return nil // transient: the slots' own attempts report what matters
	case !info.Held:
		return nil
	}
	m, ok := semN(info.Holder)
	if !ok {
		return &InvalidError{Field: "semaphore n", Reason: fmt.Sprintf(
			"semaphore %q is used with n=%d here, but slot key %q (beyond that range) is held by %q: another client uses a larger n or the key",
			s.key, s.n, beyond, info.Holder)}
	}
	return s.mixed(m, beyond)
}

// mixed returns the error for a semaphore used with two different n.
func (s *semaphore) mixed(other int, slot string) error {
	return &InvalidError{Field: "semaphore n", Reason: fmt.Sprintf(
		"semaphore %q is used with n=%d here and with n=%d by the holder of %q; all clients must use the same n",
		s.key, s.n, other, slot)}
}
