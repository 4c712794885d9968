// The etcd key layout: a lease key is one path segment under the prefix
// (with '%' and '/' percent-escaped), and its queue entries follow that
// segment after a NUL byte, so no (prefix, key) pair aliases another.

package etcdlease

import (
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
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

// parseKey returns the lease key that etcd key k belongs to, and the token
// of the waiter if k is a queue entry ("" for the lease key itself). ok is
// false for keys that are not the store's: outside the prefix, or in a
// nested namespace (prefix+"sub/..."), whose keys the store's prefix watch
// also sees.
func (s *Store) parseKey(k []byte) (key, token string, entry, ok bool) {
	rel, found := strings.CutPrefix(string(k), s.prefix)
	if !found {
		return "", "", false, false
	}
	seg, token, entry := strings.Cut(rel, queueSep)
	if strings.IndexByte(seg, 0) >= 0 {
		return "", "", false, false
	}
	key, ok = unescapeKey(seg)
	if !ok || key == "" {
		return "", "", false, false
	}
	return key, token, entry, true
}

// queueSep separates a lease key's segment from the tokens of its queue.
// Neither keys nor prefixes contain NUL, so a queue prefix holds exactly one
// key's queue and never a lease key or a nested namespace's key.
const queueSep = "\x00q/"

// queuePrefix returns the etcd prefix of key's queue of waiters.
func (s *Store) queuePrefix(key string) string { return s.keyPath(key) + queueSep }

// entryKey returns the etcd key of token's entry in key's queue.
func (s *Store) entryKey(key, token string) string { return s.queuePrefix(key) + token }

// opQueue reads key's queue: its entries (keys only), oldest first.
func (s *Store) opQueue(key string) clientv3.Op {
	return clientv3.OpGet(s.queuePrefix(key), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
}

// position returns how many entries of q come before the entry ek, and that
// entry (len(q) and nil if ek is not in q).
func position(q []*mvccpb.KeyValue, ek string) (int, *mvccpb.KeyValue) {
	for i, kv := range q {
		if string(kv.Key) == ek {
			return i, kv
		}
	}
	return len(q), nil
}
