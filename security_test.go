// Security of the core: tokens are 128 random bits and never appear in full
// in the Client's logs, through acquisition, retries, renewal failures, loss
// and release.

package lease_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestTokensNeverLoggedInFull(t *testing.T) {
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	store := leasetest.Faulty(memlease.New())
	t.Cleanup(func() { _ = store.Close() })
	c, err := lease.New(store, lease.WithLogger(logger), lease.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tokens []string

	// 1. Acquire, then renewals fail until the lease is lost.
	l1, err := c.TryAcquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, l1.Token())
	store.FailRenewals(errors.New("injected renewal failure"))
	select {
	case <-l1.Done():
	case <-ctx.Done():
		t.Fatal("the lease was not lost while renewals failed")
	}
	if !errors.Is(l1.Err(), lease.ErrLost) {
		t.Fatalf("Err after failed renewals = %v, want ErrLost", l1.Err())
	}
	store.FailRenewals(nil)

	// 2. An acquisition that fails transiently a few times, then succeeds.
	store.FailAcquire(errors.New("injected acquire failure"))
	time.AfterFunc(200*time.Millisecond, func() { store.FailAcquire(nil) })
	l2, err := c.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, l2.Token())
	time.Sleep(250 * time.Millisecond) // a few renewals
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// 3. A lease left for Close to release.
	l3, err := c.TryAcquire(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, l3.Token())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	out := logs.String()
	for _, want := range []string{"lease: lost", "renewal failed", "acquire failed", "lease: acquired", "lease: released"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q; the test did not exercise that path:\n%s", want, out)
		}
	}
	for _, tok := range tokens {
		if len(tok) != 32 {
			t.Fatalf("token %q: want 32 hex characters (128 bits)", tok)
		}
		if strings.Contains(out, tok) {
			t.Errorf("the log contains a full token %s:\n%s", tok, out)
		}
		if strings.Contains(out, tok[:16]) {
			t.Errorf("the log contains half a token %s…:\n%s", tok[:16], out)
		}
	}
	if !strings.Contains(out, tokens[0][:8]) {
		t.Errorf("the log does not even name the token's short form %s…", tokens[0][:8])
	}
}

func TestTokensAreDistinct(t *testing.T) {
	c, err := lease.New(memlease.New(), lease.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		l, err := c.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		tok := l.Token()
		if seen[tok] || strings.Trim(tok, "0123456789abcdef") != "" {
			t.Fatalf("token %q repeated or not hex", tok)
		}
		seen[tok] = true
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
