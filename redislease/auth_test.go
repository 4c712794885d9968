// Credentials live on the go-redis client; store errors never contain them.

package redislease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

func TestAuthErrorsHidePassword(t *testing.T) {
	pass := "pw-" + randHex(t, 12)
	srv := startRedis(t, "--requirepass", pass)
	ctx := testCtx(t, 30*time.Second)

	wrong := "pw-" + randHex(t, 12)
	for _, opt := range []*redis.Options{
		{Addr: srv.Addr(), Password: wrong},
		{Addr: srv.Addr(), Username: "nobody", Password: wrong},
		{Addr: srv.Addr()},
	} {
		bad := redis.NewClient(opt)
		t.Cleanup(func() { _ = bad.Close() })
		s := newStore(t, bad)
		_, err := s.Acquire(ctx, req("k", token(t), "h", time.Second))
		if err == nil || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("Acquire with bad credentials = %v, want a transient error", err)
		}
		sub, serr := s.Subscribe(ctx)
		if serr == nil {
			_ = sub.Close()
			t.Fatal("Subscribe with bad credentials succeeded")
		}
		for _, e := range []error{err, serr} {
			if msg := e.Error(); strings.Contains(msg, pass) || strings.Contains(msg, wrong) {
				t.Errorf("error reveals a password: %s", msg)
			}
		}
	}

	good := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: pass})
	t.Cleanup(func() { _ = good.Close() })
	s := newStore(t, good)
	r := req("k", token(t), "h", time.Second)
	if _, err := s.Acquire(ctx, r); err != nil {
		t.Fatalf("Acquire with the right password: %v", err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
}
