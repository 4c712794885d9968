// Every duration and count flag of every subcommand against 0, negative,
// huge and garbage values: a one-line usage error (exit 64), or the
// documented meaning, used consistently.

package main_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestFlagValues(t *testing.T) {
	store := fileStore(t)
	// Accepted values of demo and verify are paired with an unknown store
	// scheme, so that the command stops at the store, after the flags.
	const nope = "nope://x"
	type tc struct {
		cmd, flag, value string
		ok               bool // accepted: no usage error about the flag
	}
	var cases []tc
	add := func(cmd, flag string, ok bool, values ...string) {
		for _, v := range values {
			cases = append(cases, tc{cmd, flag, v, ok})
		}
	}
	add("run", "ttl", false, "0", "-1s", "5ms", "25h", "10000h", "abc", "99999999999h")
	add("run", "ttl", true, "1s", "24h")
	add("run", "timeout", false, "-1s", "abc", "99999999999h")
	add("run", "timeout", true, "0", "10000h", "2562047h") // 0: no limit; the largest duration
	add("run", "grace", false, "-1s", "25h", "10000h", "abc")
	add("run", "grace", true, "0", "24h") // 0: SIGKILL right after SIGTERM
	add("status", "timeout", false, "-1s", "abc")
	add("status", "timeout", true, "0", "10000h", "2562047h")
	add("demo", "ttl", false, "0", "-1s", "2m", "10000h", "abc")
	add("demo", "ttl", true, "10ms", "1m")
	add("demo-worker", "ttl", false, "0", "-1s", "10000h", "abc")
	add("verify", "duration", false, "0", "-1s", "25h", "10000h", "abc")
	add("verify", "duration", true, "1s", "24h")
	add("verify", "ttl", false, "0", "-1s", "2m", "10000h", "abc")
	add("verify", "ttl", true, "10ms", "1m")
	add("verify", "workers", false, "0", "-1", "65", "1000000", "99999999999999999999", "abc", "1.5")
	add("verify", "workers", true, "1", "64")
	add("verify", "hold", false, "-1", "1001", "1000000", "abc")
	add("verify", "hold", true, "0", "1000") // 0: the workers release at once
	for i, c := range cases {
		t.Run(c.cmd+"--"+c.flag+"="+c.value, func(t *testing.T) {
			key := fmt.Sprintf("flags-%d", i) // not the test's name, which names the flag
			args := []string{c.cmd, "--" + c.flag, c.value}
			switch c.cmd {
			case "run":
				args = append(args, "--store", store, key, "--", "true")
			case "status":
				args = append(args, "--store", store, key)
			default:
				args = append(args, "--store", nope)
			}
			r := lease(t, args...)
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if !c.ok {
				if r.code != 64 || len(lines) != 1 || !strings.HasPrefix(lines[0], "lease "+c.cmd+": ") || !strings.Contains(lines[0], "-"+c.flag) {
					t.Errorf("lease %v: exit %d, want 64 and one line naming -%s; stderr:\n%s", args, r.code, c.flag, r.stderr)
				}
				return
			}
			if strings.Contains(r.stderr, "-"+c.flag) {
				t.Errorf("lease %v: the accepted value was refused; stderr:\n%s", args, r.stderr)
			}
			switch c.cmd {
			case "run", "status":
				if r.code != 0 {
					t.Errorf("lease %v: exit %d, want 0; stderr:\n%s", args, r.code, r.stderr)
				}
				// The lease was released, whatever the flag: the next run
				// does not wait for it.
				if s := statusOf(t, store, key); s.Held {
					t.Errorf("lease %v left the key held: %+v", args, s)
				}
			default:
				if r.code != 64 || !strings.Contains(r.stderr, "unsupported store URL scheme") {
					t.Errorf("lease %v: exit %d, want 64 for the store URL; stderr:\n%s", args, r.code, r.stderr)
				}
			}
		})
	}
}

// TestUsageStatesDefaultStore: the usage text and --store's help name the
// default store actually in effect (here $XDG_RUNTIME_DIR's, without a home
// directory), not a fixed $XDG_STATE_HOME one.
func TestUsageStatesDefaultStore(t *testing.T) {
	for _, v := range []string{"HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"} {
		t.Setenv(v, "")
	}
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/4242")
	const want = "file:///run/user/4242/leasekit"
	for _, args := range [][]string{{"help"}, {"run", "-h"}, {"status", "-h"}} {
		r := lease(t, args...)
		if text := r.stdout + r.stderr; !strings.Contains(text, want) {
			t.Errorf("lease %s does not state the default store %s:\n%s", strings.Join(args, " "), want, text)
		}
	}
}
