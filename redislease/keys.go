// Redis key layout: lease hash, fence counter, queue of waiters and release
// channel names.

package redislease

import "strings"

// escaper percent-escapes the characters that would change a key's Redis
// Cluster hash tag. '%' is escaped too so the mapping stays injective.
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// leaseKey is the hash holding key's lease: prefix{esc(key)}.
func (s *Store) leaseKey(key string) string {
	return s.prefix + "{" + escaper.Replace(key) + "}"
}

// fenceKey is key's fence counter, in the same cluster slot as leaseKey.
func (s *Store) fenceKey(key string) string {
	return s.leaseKey(key) + ":fence"
}

// scriptKeys returns, escaping key once, the keys the acquire and release
// scripts use, all in the same cluster slot (same hash tag):
//   - lk, the lease hash (leaseKey);
//   - fence, the fence counter (fenceKey);
//   - q, key's queue of waiters (a zset: token -> arrival order);
//   - qx, the expiry of each entry of q (a zset: token -> expiry in Unix
//     milliseconds of the server clock);
//   - qd, the details of each entry of q whose store listens (a hash: token
//     -> "ttl-ms:store-id:holder"), so that a release can hand the key to
//     the first waiter.
func (s *Store) scriptKeys(key string) (lk, fence, q, qx, qd string) {
	lk = s.leaseKey(key)
	return lk, lk + ":fence", lk + ":q", lk + ":qx", lk + ":qd"
}
