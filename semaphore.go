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

// semTag follows the holder of a slot in the store: it tells other clients n.
const semTag = " [sem n="

// AcquireSemaphore acquires one of the n slots of semaphore key, waiting as
// Acquire does while all n are held (by anyone, this Client included). The
// lease is an ordinary one on the slot's key, SlotKey(key, i): its fence
// increases per slot, not across the semaphore. Every client must use the
// same n for a key; a holder seen with another n is an *InvalidError.
func (c *Client) AcquireSemaphore(ctx context.Context, key string, n int, opts ...AcquireOption) (*Lease, error) {
	s, err := c.newSemaphore(key, n, opts)
	return c.run(ctx, key, s.p, err, func(start time.Time) (*Lease, error) {
		return c.wait(ctx, key, s.p, "", s.slots, func(ctx context.Context) (*Lease, error) { return s.try(ctx, start) })
	})
}

// TrySemaphore acquires one of the n slots of semaphore key if one is free,
// and returns at once otherwise with a *HeldError for key whose Remaining is
// the earliest expiry among the slots. See AcquireSemaphore.
func (c *Client) TrySemaphore(ctx context.Context, key string, n int, opts ...AcquireOption) (*Lease, error) {
	s, err := c.newSemaphore(key, n, opts)
	return c.run(ctx, key, s.p, err, func(start time.Time) (*Lease, error) { return s.try(ctx, start) })
}

// semaphore is one acquisition of a semaphore.
type semaphore struct {
	c     *Client
	key   string
	p     params
	slots []string // the slot keys, 0..n-1
}

// newSemaphore returns s, with an error if the input is invalid.
func (c *Client) newSemaphore(key string, n int, opts []AcquireOption) (s *semaphore, err error) {
	s = &semaphore{c: c, key: key}
	if n < 1 {
		return s, Invalid("semaphore n", "%d; want at least 1", n)
	}
	if err := c.validKey(key); err != nil {
		return s, err
	}
	// Slot n, the longest key, is inspected for holders with a larger n.
	if s.p, err = c.prepare(SlotKey(key, n), opts); err != nil {
		return s, fmt.Errorf("semaphore %q with n=%d: %w", key, n, err)
	}
	s.p.tag = semTag + strconv.Itoa(n) + "]"
	s.p.reentry = false // a slot this Client holds counts as taken, whatever the Client's default
	if _, err := s.p.resolve(c.caps); err != nil {
		return s, fmt.Errorf("semaphore %q: the holder with its tag %q: %w", key, s.p.tag, err)
	}
	for i := range n {
		s.slots = append(s.slots, SlotKey(key, i))
	}
	return s, nil
}

// try makes one attempt at every slot, from a random one on. When all are
// held, the *HeldError's Remaining is the earliest expiry the store told; a
// transient error is returned only when no slot was free.
func (s *semaphore) try(ctx context.Context, start time.Time) (*Lease, error) {
	n := len(s.slots)
	beyond := SlotKey(s.key, n) // held: by a larger n, or another use of the key
	if info, err := s.c.store.Inspect(ctx, beyond); err == nil && info.Held {
		return nil, s.mixed(info.Holder, beyond)
	}
	var remaining time.Duration
	var transient error
	first := rand.N(n)
	for j := range n {
		l, err := s.c.attempt(ctx, s.c.request(s.slots[(first+j)%n], s.p, false), s.p, start, new(time.Time))
		var held *HeldError
		switch {
		case err == nil:
			return l, nil
		case errors.As(err, &held):
			if !strings.HasSuffix(held.Holder, s.p.tag) && strings.Contains(held.Holder, semTag) {
				return nil, s.mixed(held.Holder, held.Key)
			}
			if held.Remaining > 0 && (remaining == 0 || held.Remaining < remaining) {
				remaining = held.Remaining
			}
		case errors.Is(err, ErrHeld):
		case errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed), ctx.Err() != nil:
			return nil, err
		default:
			transient = err
		}
	}
	if transient != nil {
		return nil, fmt.Errorf("lease: acquire semaphore %q: %w", s.key, transient)
	}
	return nil, fmt.Errorf("lease: semaphore %q: all %d slots are held: %w", s.key, n, &HeldError{Key: s.key, Remaining: remaining})
}

// mixed returns the error for a slot held by holder, who uses another n.
func (s *semaphore) mixed(holder, slot string) error {
	return Invalid("semaphore n", "semaphore %q is used with n=%d here, but %q (holder %q) uses another n or the key: all clients must use the same n",
		s.key, len(s.slots), slot, holder)
}
