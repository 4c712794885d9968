package main_test

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"
)

// lease demo's workers get the store URL (which may hold a password) in
// their environment, not on their command lines, which ps shows to everyone.
func TestDemoWorkersArgvHasNoStore(t *testing.T) {
	store := fileStore(t)
	demo, out := background(t, "demo", "--store", store)
	var seen int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !demo.exited(); {
		for _, pid := range withMarker("demo-worker") {
			proc := "/proc/" + strconv.Itoa(pid)
			cmdline, err1 := os.ReadFile(proc + "/cmdline")
			environ, err2 := os.ReadFile(proc + "/environ")
			if err1 != nil || err2 != nil || !bytes.Contains(append(cmdline, environ...), []byte(store)) {
				continue // another test's worker, or gone
			}
			seen++
			if bytes.Contains(cmdline, []byte(store)) {
				t.Fatalf("a demo worker has the store URL on its command line: %q", cmdline)
			}
		}
		if seen > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if seen == 0 {
		t.Fatalf("saw no demo worker; demo output:\n%s", out.String())
	}
	// Let the demo end its workers.
	waitFor(t, 30*time.Second, "the demo to end", demo.exited)
}
