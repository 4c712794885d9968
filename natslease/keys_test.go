package natslease

import (
	"regexp"
	"testing"
)

var kvToken = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+$`)

// TestEscape: every key escapes into one KV token that unescapes to it, and
// a prefix's escape is a prefix of its keys'; tokens esc never makes are
// not keys.
func TestEscape(t *testing.T) {
	for _, k := range []string{"a", "a.b", "a b/c", "x=41", "ünï", "\x00\xff", "*", ">", "-_/"} {
		e := esc(k)
		if got, ok := unesc(e); !ok || got != k {
			t.Errorf("unesc(esc(%q) = %q) = %q, %v", k, e, got, ok)
		}
		if !kvToken.MatchString(e) {
			t.Errorf("esc(%q) = %q is not one KV token", k, e)
		}
		if p := esc(k[:len(k)/2]); e[:len(p)] != p {
			t.Errorf("esc of a prefix of %q is %q, not a prefix of %q", k, p, e)
		}
	}
	for _, e := range []string{"", "=", "=4", "=zz", "=41", "=2e41", "a=2b"} {
		if k, ok := unesc(e); ok {
			t.Errorf("unesc(%q) = %q, want not a key", e, k)
		}
	}
}
