package leasetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// WantCorrupt checks a store over data it cannot have written under key (a
// test puts it there with the backend's own client): Acquire by a new token,
// and by token if not empty (the hold the garbage replaced), and Inspect
// return an error matching lease.ErrCorrupt, never a grant or a panic; Renew
// fails with ErrCorrupt or ErrNotHeld (a store whose renewal does not read
// the garbage finds no hold of the token); Release returns nil, ErrCorrupt
// or ErrNotHeld, never an error the Client would retry; List, if s is a
// driver.Lister, returns ErrCorrupt or leaves the key out. what names the
// garbage in failures.
func WantCorrupt(t testing.TB, s driver.Store, key, token, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	fresh := driver.Request{Key: key, Token: hex.EncodeToString(b), Holder: "intruder", TTL: time.Minute}
	tokens := []string{fresh.Token}
	if token != "" {
		tokens = append(tokens, token)
	}
	for _, tok := range tokens {
		r := fresh
		r.Token = tok
		if g, err := s.Acquire(ctx, r); !errors.Is(err, lease.ErrCorrupt) {
			t.Errorf("%s: Acquire by %s = %+v, %v; want ErrCorrupt", what, tok, g, err)
		}
		if err := s.Renew(ctx, r); !errors.Is(err, lease.ErrCorrupt) && !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s: Renew by %s: %v; want ErrCorrupt or ErrNotHeld", what, tok, err)
		}
		if err := s.Release(ctx, r); err != nil && !errors.Is(err, lease.ErrCorrupt) && !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s: Release by %s: %v; want nil, ErrCorrupt or ErrNotHeld", what, tok, err)
		}
	}
	if info, err := s.Inspect(ctx, key); !errors.Is(err, lease.ErrCorrupt) {
		t.Errorf("%s: Inspect = %+v, %v; want ErrCorrupt", what, info, err)
	}
	if l, ok := s.(driver.Lister); ok {
		page, _, err := l.List(ctx, key, "", 10)
		if err != nil && !errors.Is(err, lease.ErrCorrupt) {
			t.Errorf("%s: List: %v; want ErrCorrupt or no entry", what, err)
		}
		for _, e := range page {
			if e.Key == key {
				t.Errorf("%s: List shows %+v; want ErrCorrupt or no entry", what, e)
			}
		}
	}
}
