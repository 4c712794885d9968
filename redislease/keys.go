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

// queueKey is key's queue of waiters (a zset: token -> arrival order), in the
// same cluster slot as leaseKey.
func (s *Store) queueKey(key string) string {
	return s.leaseKey(key) + ":q"
}

// queueExpiryKey holds the expiry of each entry of queueKey (a zset: token ->
// expiry in Unix milliseconds of the server clock), in the same cluster slot.
func (s *Store) queueExpiryKey(key string) string {
	return s.leaseKey(key) + ":qx"
}
