// Release announcements over LISTEN/NOTIFY (lease.Notifier): one dedicated
// connection per subscription, listening on the store's channel.

package pglease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
)

// errSubClosed is returned by Next after Close.
var errSubClosed = errors.New("pglease: subscription closed")

// Subscribe takes one connection out of the pool for good, LISTENs on the
// store's channel (one per table and namespace; the payload is described at
// NextAnnouncement) and returns once the server has confirmed it, so every
// release committed after it returns is delivered. While a subscription is
// open, the store's table-mode waiters ask to be handed the key. A
// lease.Client makes one subscription for all its waiters. Closing the
// subscription closes the connection.
func (s *Store) Subscribe(ctx context.Context) (lease.Subscription, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pglease: subscribe: %w", err)
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(ctx, "LISTEN "+s.channel); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("pglease: subscribe %s: %w", s.chanRaw, err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s.listening.Add(1)
	return &subscription{conn: conn, ctx: sctx, cancel: cancel, listening: &s.listening}, nil
}

var _ lease.Announcer = (*subscription)(nil)

// subscription is a lease.Subscription over one LISTENing connection.
type subscription struct {
	mu        sync.Mutex // held by Next while it reads, and by Close
	conn      *pgx.Conn
	ctx       context.Context // ended by Close
	cancel    context.CancelFunc
	closed    bool
	listening *atomic.Int32 // the store's count of open subscriptions
}

// Next returns the key of the next release announced on the channel. A
// connection error (a server restart, a network failure) is returned as is;
// the subscription is then broken and the Client makes a new one.
func (s *subscription) Next(ctx context.Context) (string, error) {
	a, err := s.NextAnnouncement(ctx)
	return a.Key, err
}

// NextAnnouncement is Next with the token of the waiter at the head of the
// key's queue when it was released (see [lease.Announcer]). The payload is
// that token ("" when nobody waits), then a newline and the key; tokens made
// by lease.Client are hexadecimal, so the first newline ends the token. The
// announcement only wakes that waiter: a key handed to it (table mode) is
// granted by its Acquire, never by the payload, which any role may send with
// pg_notify. Whatever follows a space in the token (the fence that earlier
// versions sent with a hand-off) is ignored.
func (s *subscription) NextAnnouncement(ctx context.Context) (lease.Announcement, error) {
	ctx, stop := mergeCancel(ctx, s.ctx)
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return lease.Announcement{}, errSubClosed
	}
	n, err := s.conn.WaitForNotification(ctx)
	if err != nil {
		if s.ctx.Err() != nil {
			return lease.Announcement{}, errSubClosed
		}
		if cerr := ctx.Err(); cerr != nil {
			return lease.Announcement{}, cerr
		}
		return lease.Announcement{}, fmt.Errorf("pglease: subscription: %w", err)
	}
	next, key, ok := strings.Cut(n.Payload, "\n")
	if !ok {
		return lease.Announcement{Key: n.Payload}, nil
	}
	next, _, _ = strings.Cut(next, " ")
	return lease.Announcement{Key: key, Next: next}, nil
}

// Close ends the subscription, unblocks Next and closes the connection.
func (s *subscription) Close() error {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.listening.Add(-1)
	closeConn(s.conn)
	return nil
}

// mergeCancel returns a context that ends when a or b ends.
func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}
