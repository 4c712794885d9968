// Lease keys as KV keys: the namespace token, then the key escaped into one
// token.

package natslease

import (
	"encoding/hex"
	"strings"
)

// kvKey is key's KV key: the namespace, a dot, and esc(key).
func (s *Store) kvKey(key string) string { return s.ns + "." + esc(key) }

// subject is the stream subject of KV key k.
func (s *Store) subject(k string) string { return "$KV." + s.kv.Bucket() + "." + k }

// leaseKey returns the lease key of KV key k, false if k is not one of the
// store's lease keys.
func (s *Store) leaseKey(k string) (string, bool) {
	e, ok := strings.CutPrefix(k, s.ns+".")
	if !ok {
		return "", false
	}
	return unesc(e)
}

// esc keeps ASCII letters, digits, '-', '_' and '/' and writes every other
// byte as '=' and two upper-case hex digits: a valid KV token, and the
// escape of a prefix is a prefix of the escapes of the keys it starts.
func esc(key string) string {
	var b strings.Builder
	for i := range len(key) {
		switch c := key[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '/':
			b.WriteByte(c)
		default:
			b.WriteByte('=')
			b.WriteString(strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// unesc inverts esc; false for a token esc never makes.
func unesc(e string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(e); i++ {
		if e[i] != '=' {
			b.WriteByte(e[i])
			continue
		}
		v, err := hex.DecodeString(e[min(i+1, len(e)):min(i+3, len(e))])
		if err != nil || len(v) != 1 {
			return "", false
		}
		b.WriteByte(v[0])
		i += 2
	}
	k := b.String()
	return k, k != "" && esc(k) == e
}
