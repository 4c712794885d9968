// The etcd key layout: a lease key is one path segment under the prefix
// (with '%' and '/' percent-escaped), and its queue entries, readers and
// read epoch follow that segment after a NUL byte, so no (prefix, key) pair
// aliases another.

package etcdlease

import (
	"strings"

	"github.com/leasekit/lease/driver"
)

// escapeKey turns a lease key into one segment of an etcd key: '%' becomes
// "%25" and '/' "%2F"; every other byte is kept, so keys without either
// read as they are in etcdctl.
func escapeKey(key string) string { return escaper.Replace(key) }

var escaper = strings.NewReplacer("%", "%25", "/", "%2F")

// unescapeKey inverts escapeKey; ok is false for a segment escapeKey never
// returns (one with a '/' or a '%' not followed by 25 or 2F): escaping the
// result again would not give it back.
func unescapeKey(seg string) (key string, ok bool) {
	key = unescaper.Replace(seg)
	return key, escapeKey(key) == seg
}

var unescaper = strings.NewReplacer("%25", "%", "%2F", "/")

// normPrefix returns prefix ending in "/": the key segments below it are
// then delimited from the prefix, so a store with prefix "/app" never reads
// or watches the keys of one with prefix "/app-2".
func normPrefix(prefix string) string {
	if strings.HasSuffix(prefix, "/") {
		return prefix
	}
	return prefix + "/"
}

// keyPath returns the etcd key of lease key.
func (s *Store) keyPath(key string) string { return s.prefix + escapeKey(key) }

// parseKey returns the lease key that etcd key k belongs to, the kind of
// sub-key k is (0 for the lease key itself) and its token ("" for the lease
// key and the epoch). ok is false for keys that are not the store's:
// outside the prefix, or in a nested namespace (prefix+"sub/..."), whose
// keys the store's prefix watch also sees.
func (s *Store) parseKey(k []byte) (key, token string, kind byte, ok bool) {
	rel, found := strings.CutPrefix(string(k), s.prefix)
	if !found {
		return "", "", 0, false
	}
	seg, rest, sub := strings.Cut(rel, "\x00")
	if sub {
		if len(rest) < 2 || rest[1] != '/' || !strings.ContainsRune("qsreb", rune(rest[0])) {
			return "", "", 0, false
		}
		kind, token = rest[0], rest[2:]
	}
	key, ok = unescapeKey(seg)
	if !ok || key == "" {
		return "", "", 0, false
	}
	return key, token, kind, true
}

// The kinds of a lease key's sub-keys, which follow its segment after a NUL
// byte: kind, "/" and a token. Neither keys nor prefixes contain NUL, so the
// sub-keys of a key are exactly those under its subPrefix.
const (
	kindWaiter = 'q' // an exclusive waiter's queue entry (value: the holder)
	kindShared = 's' // a shared waiter's queue entry (value: the holder)
	kindReader = 'r' // a reader's hold (value: the holder)
	kindEpoch  = 'e' // the read epoch (no token, no value, no etcd lease)
	kindBroken = 'b' // a token evicted by Break: its tombstone (value: its etcd lease, in decimal)
)

// subPrefix returns the etcd prefix of key's sub-keys.
func (s *Store) subPrefix(key string) string { return s.keyPath(key) + "\x00" }

// subKey returns the etcd key of key's sub-key of kind for token; with
// token "", the prefix of that kind's keys (for kindEpoch, its one key).
func (s *Store) subKey(key string, kind byte, token string) string {
	return s.subPrefix(key) + string(kind) + "/" + token
}

// entryKey returns the etcd key of r.Token's queue entry.
func (s *Store) entryKey(r driver.Request) string {
	if r.Shared {
		return s.subKey(r.Key, kindShared, r.Token)
	}
	return s.subKey(r.Key, kindWaiter, r.Token)
}
