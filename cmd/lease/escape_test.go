// A holder or key from the store is written by whoever can reach it: the
// CLI's human-readable output escapes their control characters, so that they
// can neither fake lines ("status: free") nor drive the operator's terminal.

package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// attack fakes a free key and clears the screen when printed raw.
const attack = "x\nstatus:    free\n\x1b[2J\u009b2J"

// rawControl returns the first control character (other than a line's
// '\n'), C1 character or invalid UTF-8 byte in out, or "".
func rawControl(out string) string {
	for i, r := range out {
		if r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD") || r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f {
			return out[max(i-20, 0):min(i+20, len(out))]
		}
	}
	return ""
}

// statusLine returns what follows "status:" in lease status's output, or
// "several" if more than one line starts with it.
func statusLine(out string) string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "status:"); ok {
			got = append(got, strings.TrimSpace(v))
		}
	}
	if len(got) != 1 {
		return "several"
	}
	return got[0]
}

func TestOutputEscapesHolderAndKey(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	holder, out := background(t, "run", "--store", store, key, "--holder", attack, "--", "sleep", "60")
	waitFor(t, 20*time.Second, "the attacker's holder", func() bool {
		if holder.exited() {
			t.Fatalf("lease run exited: %s", out.String())
		}
		return statusOf(t, store, key).Held
	})

	// status --json: encoding/json escapes, and the holder reads back exact.
	r := lease(t, "status", "--store", store, "--json", key)
	var s status
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Holder != attack || strings.Count(r.stdout, "\n") != 1 || rawControl(r.stdout) != "" {
		t.Errorf("status --json: %v, %q", err, r.stdout)
	}
	// status, text: the same lines as for any holder, the holder escaped.
	r = lease(t, "status", "--store", store, key)
	if r.code != 0 || rawControl(r.stdout) != "" || !strings.HasPrefix(statusLine(r.stdout), "held") || !strings.Contains(r.stdout, `holder:    x\nstatus:    free\n\x1b[2J\u009b2J`+"\n") {
		t.Errorf("status: exit %d, control characters near %q:\n%s", r.code, rawControl(r.stdout), r.stdout)
	}
	// lease run's text log while it waits names the holder; its error too.
	r = lease(t, "run", "--store", store, key, "--timeout", "300ms", "--", "true")
	if r.code != 75 || !strings.Contains(r.stderr, "lease held, waiting") || rawControl(r.stderr) != "" {
		t.Errorf("run --timeout: exit %d, control characters near %q:\n%s", r.code, rawControl(r.stderr), r.stderr)
	}
	r = lease(t, "run", "--store", store, key, "--no-wait", "--", "true")
	if r.code != 75 || rawControl(r.stderr) != "" {
		t.Errorf("run --no-wait: exit %d, control characters near %q:\n%s", r.code, rawControl(r.stderr), r.stderr)
	}

	// A key with the attack in it: status, lease run's logs, and fail's
	// error lines.
	bad := key + attack
	r = lease(t, "status", "--store", store, bad)
	if r.code != 0 || rawControl(r.stdout) != "" || statusLine(r.stdout) != "free" {
		t.Errorf("status of a bad key: exit %d, control characters near %q:\n%s", r.code, rawControl(r.stdout), r.stdout)
	}
	r = lease(t, "run", "--store", store, bad, "--holder", attack, "--", "true")
	if r.code != 0 || !strings.Contains(r.stderr, "lease acquired") || rawControl(r.stderr) != "" {
		t.Errorf("run on a bad key: exit %d, control characters near %q:\n%s", r.code, rawControl(r.stderr), r.stderr)
	}
	r = lease(t, "run", "--store", store, bad, "--timeout", "-1s", "--", "true")
	if r.code != 64 || rawControl(r.stderr) != "" {
		t.Errorf("usage error: exit %d, control characters near %q:\n%s", r.code, rawControl(r.stderr), r.stderr)
	}
	r = lease(t, "status", "--store", "nosuch://"+attack, key)
	if r.code != 64 || rawControl(r.stderr) != "" {
		t.Errorf("a bad store URL: exit %d, control characters near %q:\n%s", r.code, rawControl(r.stderr), r.stderr)
	}
}
