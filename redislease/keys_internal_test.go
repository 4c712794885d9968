// Tests of the key layout that need the unexported helpers.

package redislease

import "testing"

// TestScriptKeys checks the five script keys cut from one string against
// leaseKey and fenceKey, for keys that need escaping and keys that do not.
func TestScriptKeys(t *testing.T) {
	for _, prefix := range []string{"", "lease:", "app:{x}:"} {
		s := &Store{prefix: prefix}
		for _, key := range []string{"", "job", "a{b}c", "100%", "ключ"} {
			lk, fence, q, qx, qd := s.scriptKeys(key)
			want := s.leaseKey(key)
			got := [...]string{lk, fence, q, qx, qd}
			wants := [...]string{want, s.fenceKey(key), want + ":q", want + ":qx", want + ":qd"}
			if got != wants {
				t.Errorf("prefix %q key %q: scriptKeys = %q, want %q", prefix, key, got, wants)
			}
		}
	}
}
