// The harness against a private PostgreSQL server that the nemesis restarts
// (pg_ctl stop -m immediate, a crash with recovery, and -m fast, in turn)
// while leases are held. Run it alone with
//
//	./scripts/test -run TestPostgresRestart ./verify/

package verify_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease/internal/pgtest"
	"github.com/leasekit/lease/verify"
)

// privatePG is a throwaway PostgreSQL cluster (internal/pgtest) with fsync
// off, restartable on the same port, counting its restarts.
type privatePG struct {
	*pgtest.Server
	t *testing.T

	mu       sync.Mutex
	restarts int
	modes    map[string]int // restarts by shutdown mode
}

func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	return &privatePG{Server: pgtest.Start(t, "fsync=off", "max_connections=200"), t: t, modes: map[string]int{}}
}

// restart stops the server — -m immediate (no checkpoint: crash recovery
// at start) and -m fast (clients cut, checkpoint) in turn — keeps it down
// for a second and starts it again on the same port.
func (p *privatePG) restart(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	mode := "immediate"
	if p.restarts%2 == 1 {
		mode = "fast"
	}
	p.restarts++
	p.t.Logf("verify: pg_ctl stop -m %s and start the private PostgreSQL again", mode)
	if err := p.Stop(mode); err != nil {
		return err
	}
	p.modes[mode]++
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	return p.Start()
}

// TestPostgresRestart: leases in a private server that is restarted, the
// fenced register on the shared test server. The register stays up while
// the lease store is down, as a resource separate from the lock service
// would: holders that can no longer renew still reach it, which is the case
// fencing must catch. (With the register on the restarted server, it would
// be unreachable exactly while leases are in doubt.)
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	spec := postgresRegister(t, "pgrestart-")
	p := startPrivatePG(t)
	prefix := "verify-test-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	// TTL 1s: a restart keeps the server away for a second or two, longer
	// than TestPostgres's 500ms TTL by itself.
	rep := run(t, verify.Config{Store: p.DSN(), Register: spec, TTL: time.Second, Prefix: prefix,
		Duration: max(runDuration(t), 40*time.Second), Restart: p.restart,
		Faults: []string{verify.FaultRestart, verify.FaultKill, verify.FaultRestart, verify.FaultStop}})
	check(t, rep, verify.FaultRestart, verify.FaultKill, verify.FaultStop)
	p.mu.Lock()
	t.Logf("restarts by shutdown mode: %v", p.modes)
	if p.modes["immediate"] == 0 || p.modes["fast"] == 0 {
		t.Errorf("restarts by mode %v: want both immediate and fast", p.modes)
	}
	p.mu.Unlock()
	// The run cleaned up after itself: no row of its namespace is left.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	err = pool.QueryRow(ctx, "SELECT count(*) FROM leasekit_leases WHERE ns = $1", prefix).Scan(&n)
	if err != nil || n != 0 {
		t.Errorf("rows left behind in leasekit_leases: %d, %v", n, err)
	}
}
