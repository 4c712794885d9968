// A private PostgreSQL server for tests that crash or reconfigure it (see
// internal/pgtest): stopped and removed when the test ends.

package pglease_test

import (
	"testing"

	"github.com/leasekit/lease/internal/pgtest"
)

type privatePG struct {
	*pgtest.Server
	t testing.TB
}

// startPrivatePG starts a private server or fails the test (it needs the
// same PostgreSQL installation as the shared test server). conf are extra
// settings ("name=value"); without any, fsync is off.
func startPrivatePG(t testing.TB, conf ...string) *privatePG {
	t.Helper()
	sharedDSN(t) // skip like the other tests when no PostgreSQL is configured
	return &privatePG{Server: pgtest.Start(t, conf...), t: t}
}

// start starts the server again or fails the test.
func (p *privatePG) start() {
	p.t.Helper()
	if err := p.Start(); err != nil {
		p.t.Fatal(err)
	}
}

// crash stops the server at once, as a crash would (recovery on start).
func (p *privatePG) crash() {
	p.t.Helper()
	if err := p.Stop("immediate"); err != nil {
		p.t.Fatal(err)
	}
}
