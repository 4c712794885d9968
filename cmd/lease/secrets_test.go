// Secrets do not reach other processes: lease run's command does not inherit
// $LEASE_STORE (unless --pass-store), and lease demo's workers do not get
// the store URL on their command lines.

package main_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// leaseEnv runs the binary like lease, with $LEASE_STORE set to store.
func leaseEnv(t *testing.T, store string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "LEASE_STORE="+store)
	cmd.WaitDelay = 5 * time.Second
	_ = cmd.Run()
	return result{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
}

func TestRunHidesStoreEnv(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	r := leaseEnv(t, store, "run", key, "--", "env")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "LEASE_STORE=") || strings.Contains(r.stdout, store) {
		t.Errorf("the command saw the store URL:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "LEASE_KEY="+key+"\n") {
		t.Errorf("the command did not see LEASE_KEY:\n%s", r.stdout)
	}
	r = leaseEnv(t, store, "run", key, "--pass-store", "--", "env")
	if r.code != 0 || !strings.Contains(r.stdout, "LEASE_STORE="+store+"\n") {
		t.Errorf("--pass-store: exit %d, the command did not see LEASE_STORE=%s:\n%s\n%s", r.code, store, r.stdout, r.stderr)
	}
}
