// Redis key layout: lease, fence counter, queue of waiters and release
// channel names.

package redislease

import "strings"

// escaper percent-escapes the characters that would change a key's Redis
// Cluster hash tag. '%' is escaped too so the mapping stays injective.
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// leaseKey is the string holding key's lease: prefix{esc(key)}.
func (s *Store) leaseKey(key string) string {
	return s.prefix + "{" + escaper.Replace(key) + "}"
}

// fenceKey is key's fence counter, in the same cluster slot as leaseKey.
func (s *Store) fenceKey(key string) string {
	return s.leaseKey(key) + ":fence"
}

// scriptKeys returns, escaping key once, the keys the acquire and release
// scripts use, all in the same cluster slot (same hash tag):
//   - lk, the lease (leaseKey);
//   - fence, the fence counter (fenceKey);
//   - q, key's queue of waiters (a zset: token -> arrival order);
//   - qx, the expiry of each entry of q (a zset: token -> expiry in Unix
//     milliseconds of the server clock);
//   - qd, the details of each entry of q whose store listens (a hash: token
//     -> "ttl-ms:store-id:holder"), so that a release can hand the key to
//     the first waiter.
//
// The five share one allocation: they are cut from one string.
func (s *Store) scriptKeys(key string) (lk, fence, q, qx, qd string) {
	esc := escaper.Replace(key)
	n := len(s.prefix) + len(esc) + 2 // leaseKey's length
	var b strings.Builder
	b.Grow(5*n + len(":fence:q:qx:qd"))
	for _, suffix := range [...]string{"", ":fence", ":q", ":qx", ":qd"} {
		b.WriteString(s.prefix)
		b.WriteByte('{')
		b.WriteString(esc)
		b.WriteByte('}')
		b.WriteString(suffix)
	}
	all := b.String()
	lk, all = all[:n], all[n:]
	fence, all = all[:n+6], all[n+6:]
	q, all = all[:n+2], all[n+2:]
	qx, qd = all[:n+3], all[n+3:]
	return lk, fence, q, qx, qd
}
