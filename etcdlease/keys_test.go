// The key layout, without a server.

package etcdlease

import (
	"testing"

	"github.com/leasekit/lease/driver"
)

func TestKeyLayout(t *testing.T) {
	s := &Store{prefix: normPrefix("/app")}
	seen := make(map[string]string)
	for _, k := range []string{"x", "sub/x", "sub%2Fx", "sub%252Fx", "%", "/", "//", "a/b/c", "%2", "q/", "é/ü"} {
		p := s.keyPath(k)
		if other, dup := seen[p]; dup {
			t.Errorf("keys %q and %q share the etcd key %q", k, other, p)
		}
		seen[p] = k
		if got, token, kind, ok := s.parseKey([]byte(p)); !ok || kind != 0 || got != k || token != "" {
			t.Errorf("parseKey(keyPath(%q)) = %q, %q, %q, %v", k, got, token, kind, ok)
		}
		for _, r := range []driver.Request{{Key: k, Token: "t0k/en"}, {Key: k, Token: "t0k/en", Shared: true}} {
			want := byte(kindWaiter)
			if r.Shared {
				want = kindShared
			}
			if got, token, kind, ok := s.parseKey([]byte(s.entryKey(r))); !ok || kind != want || got != k || token != r.Token {
				t.Errorf("parseKey(entryKey(%+v)) = %q, %q, %q, %v", r, got, token, kind, ok)
			}
		}
		if got, token, kind, ok := s.parseKey([]byte(s.subKey(k, kindEpoch, ""))); !ok || kind != kindEpoch || got != k || token != "" {
			t.Errorf("parseKey(epoch of %q) = %q, %q, %q, %v", k, got, token, kind, ok)
		}
		if got, token, kind, ok := s.parseKey([]byte(s.subKey(k, kindBroken, "t0k"))); !ok || kind != kindBroken || got != k || token != "t0k" {
			t.Errorf("parseKey(tombstone of %q) = %q, %q, %q, %v", k, got, token, kind, ok)
		}
	}
	// Keys that are not the store's: a nested namespace's, another
	// prefix's, segments escapeKey never makes.
	for _, k := range []string{"/app/sub/x", "/app/sub/x\x00q/t", "/app2/x", "/app", "/app/", "/app/a%2fb", "/app/a%2", "/app/a%41", "/app/a\x00b", "/app/a\x00x/t", "/app/a\x00q"} {
		if key, _, _, ok := s.parseKey([]byte(k)); ok {
			t.Errorf("parseKey(%q) = %q, want not the store's", k, key)
		}
	}
}
