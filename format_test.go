package lease_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

// A *Lease or Request printed or logged by mistake must not reveal the token,
// which renews and releases the lease.
func TestLeaseAndRequestHideToken(t *testing.T) {
	c, err := lease.New(memlease.New(), lease.WithHolder("worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(context.Background(), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	req := driver.Request{Key: "jobs", Token: l.Token(), Holder: "worker-1", TTL: time.Second}
	tok := l.Token()
	for _, v := range []any{l, req, &req} {
		printed := fmt.Sprintf("%v|%+v|%#v|%s|%q", v, v, v, v, v)
		if strings.Contains(printed, tok) {
			t.Errorf("%T printed with the full token: %s", v, printed)
		}
		if !strings.Contains(printed, tok[:8]+"…") || !strings.Contains(printed, "jobs") || !strings.Contains(printed, "worker-1") {
			t.Errorf("%T printed without key, holder or short token: %s", v, printed)
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("m", "lease", v)
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("m", "lease", v)
		if logged := buf.String(); strings.Contains(logged, tok) || !strings.Contains(logged, tok[:8]+"…") {
			t.Errorf("%T logged: %s", v, logged)
		}
	}
	if s := fmt.Sprint(l); !strings.Contains(s, fmt.Sprintf("fence=%d", l.Fence())) {
		t.Errorf("lease printed without its fence: %s", s)
	}
}
