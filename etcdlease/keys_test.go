// The key layout, without a server.

package etcdlease

import "testing"

func TestKeyLayout(t *testing.T) {
	s := &Store{prefix: normPrefix("/app")}
	seen := make(map[string]string)
	for _, k := range []string{"x", "sub/x", "sub%2Fx", "sub%252Fx", "%", "/", "//", "a/b/c", "%2", "q/", "é/ü"} {
		p := s.keyPath(k)
		if other, dup := seen[p]; dup {
			t.Errorf("keys %q and %q share the etcd key %q", k, other, p)
		}
		seen[p] = k
		if got, token, entry, ok := s.parseKey([]byte(p)); !ok || entry || got != k || token != "" {
			t.Errorf("parseKey(keyPath(%q)) = %q, %q, %v, %v", k, got, token, entry, ok)
		}
		if got, token, entry, ok := s.parseKey([]byte(s.entryKey(k, "t0k/en"))); !ok || !entry || got != k || token != "t0k/en" {
			t.Errorf("parseKey(entryKey(%q)) = %q, %q, %v, %v", k, got, token, entry, ok)
		}
	}
	// Keys that are not the store's: a nested namespace's, another
	// prefix's, segments escapeKey never makes.
	for _, k := range []string{"/app/sub/x", "/app/sub/x\x00q/t", "/app2/x", "/app", "/app/", "/app/a%2fb", "/app/a%2", "/app/a%41", "/app/a\x00b"} {
		if key, _, _, ok := s.parseKey([]byte(k)); ok {
			t.Errorf("parseKey(%q) = %q, want not the store's", k, key)
		}
	}
}
