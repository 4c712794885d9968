// lease verify end to end: a clean run on the file store, the JSON report,
// usage errors (exit 64), an unreachable store or register (69), and no
// credential in any output.

package main_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekit/lease/leaseurl"
)

func TestVerifyFileStore(t *testing.T) {
	dir := t.TempDir()
	r := lease(t, "verify", "--store", "file://"+filepath.Join(dir, "leases"), "--duration", "6s", "--ttl", "300ms", "--faults", "kill,break", "--json")
	if r.code != 0 {
		t.Fatalf("lease verify: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var rep struct {
		Acquisitions, Operations, StaleAccepted, StuckLeases int
		Linearizable                                         bool
		Faults                                               map[string]int
		Violations                                           []string
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("the --json report does not parse: %v\n%s", err, r.stdout)
	}
	if rep.Acquisitions < 5 || rep.Operations < 5 || !rep.Linearizable || rep.StaleAccepted != 0 || rep.StuckLeases != 0 || len(rep.Violations) != 0 {
		t.Fatalf("report %+v: want a clean, linearizable run that did something", rep)
	}
	if rep.Faults["kill -9"] == 0 || rep.Faults["forced release"] == 0 {
		t.Errorf("no kill -9 or no forced release was injected: %v", rep.Faults)
	}
	// The run cleans up: no lease file of its key is left behind.
	left, _ := filepath.Glob(filepath.Join(dir, "leases", "*verify*"))
	if len(left) != 0 {
		t.Errorf("files left behind: %v", left)
	}
}

func TestVerifyUsageAndCredentials(t *testing.T) {
	const pw = "hunter2-very-secret"
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"verify", "--faults", "meteor"}, 64},
		{[]string{"verify", "--duration", "-1s"}, 64},
		{[]string{"verify", "extra"}, 64},
		{[]string{"verify", "--store", "nope://x"}, 64},
		{[]string{"verify", "--store", "redis://:" + pw + "@127.0.0.1:1/0", "--duration", "1s"}, 69},
		{[]string{"verify", "--store", "file://" + t.TempDir(), "--duration", "1s", "--register", "postgres://u:" + pw + "@127.0.0.1:1/db?connect_timeout=2"}, 69},
	} {
		r := lease(t, tc.args...)
		if r.code != tc.code {
			t.Errorf("lease %v: exit %d, want %d\n%s%s", tc.args, r.code, tc.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, pw) {
			t.Errorf("lease %v printed the password:\n%s%s", tc.args, r.stdout, r.stderr)
		}
	}
}

// lease verify --workload: transfer on the file store; read-write where the
// file store keeps shared holds, else exit 64; an unknown workload, 64.
func TestVerifyWorkloads(t *testing.T) {
	dir := t.TempDir()
	r := lease(t, "verify", "--store", "file://"+filepath.Join(dir, "leases"), "--workload", "transfer", "--duration", "6s", "--ttl", "300ms", "--json")
	var rep struct {
		Workload                               string
		Acquisitions, Transfers, StaleAccepted int
		SumViolations                          int
		FinalSum                               int64
		Linearizable                           bool
		Violations                             []string
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("lease verify --workload transfer: exit %d, %v\nstdout:\n%s\nstderr:\n%s", r.code, err, r.stdout, r.stderr)
	}
	if rep.Workload != "transfer" || rep.Transfers < 5 || rep.SumViolations != 0 || rep.FinalSum != 2000 || !rep.Linearizable || len(rep.Violations) != 0 {
		t.Errorf("report %+v: want a clean transfer run, sum 2000", rep)
	}

	store := "file://" + filepath.Join(t.TempDir(), "leases")
	s, err := leaseurl.Open(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	shared := s.Caps().Shared
	_ = s.Close()
	r = lease(t, "verify", "--store", store, "--workload", "read-write", "--duration", "4s", "--ttl", "300ms")
	switch {
	case !shared && (r.code != 64 || !strings.Contains(r.stderr, "does not keep shared holds")):
		t.Errorf("read-write on a store without shared holds: exit %d, want 64 and a message\n%s", r.code, r.stderr)
	case shared && (r.code != 0 || !strings.Contains(r.stdout, "of readers")):
		t.Errorf("read-write: exit %d, want 0 and a report\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	r = lease(t, "verify", "--workload", "meteor")
	if r.code != 64 || !strings.Contains(r.stderr, "unknown workload") {
		t.Errorf("--workload meteor: exit %d, want 64\n%s", r.code, r.stderr)
	}
}
