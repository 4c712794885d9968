//go:build linux

// Lease file names: an injective, directory-safe encoding of keys. The file
// records its key, so nothing decodes a name.

package filelease

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Suffix ends the name of every lease file; other files in the directory are
// ignored.
const Suffix = ".lease"

// escape percent-escapes every byte of key outside [A-Za-z0-9._-], and a
// leading '.': the result is never ".", ".." or hidden, and has no '/', NUL
// or '~'.
func escape(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' && i > 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// fileName returns escape(key) + Suffix or, when that is longer than 255
// bytes, a prefix of it, '~', the key's SHA-256 in hex and Suffix.
func fileName(key string) string {
	enc := escape(key)
	if len(enc)+len(Suffix) <= 255 {
		return enc + Suffix
	}
	sum := sha256.Sum256([]byte(key))
	cut := 255 - len(Suffix) - 1 - 2*len(sum)
	switch { // cut no escape in two
	case enc[cut-1] == '%':
		cut--
	case enc[cut-2] == '%':
		cut -= 2
	}
	return enc[:cut] + "~" + hex.EncodeToString(sum[:]) + Suffix
}
