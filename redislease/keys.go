// Redis key layout: lease hash, fence counter and release channel names.

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
