//go:build linux

// Lease file names: the injective, directory-safe encoding of a key into a
// file name, and its inverse for release announcements.

package filelease

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Suffix ends the name of every lease file; other files in the directory are
// ignored.
const Suffix = ".lease"

// maxName is the longest file name most Linux file systems accept.
const maxName = 255

// hashMark separates the readable prefix of a long key's file name from the
// key's hash. The encoding always escapes it, so only hashed names contain it.
const hashMark = '~'

// safeByte reports whether c appears unescaped in a file name.
func safeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

const hexDigits = "0123456789ABCDEF"

// escape percent-escapes every byte of key outside [A-Za-z0-9._-], and a
// leading '.', so the result is never empty, ".", ".." or a hidden file, and
// contains no '/' or NUL.
func escape(key string) string {
	var b strings.Builder
	b.Grow(len(key) + len(Suffix))
	for i := 0; i < len(key); i++ {
		c := key[i]
		if safeByte(c) && (c != '.' || i > 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// fileName returns the name of key's lease file: escape(key) + Suffix, or,
// when that is longer than 255 bytes, a readable prefix of it, '~', the
// SHA-256 of the key in hex and Suffix. The file itself records the full key,
// which every operation checks.
func fileName(key string) string {
	enc := escape(key)
	if len(enc)+len(Suffix) <= maxName {
		return enc + Suffix
	}
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	cut := maxName - len(Suffix) - 1 - len(h)
	// Never cut an escape sequence in two.
	switch {
	case enc[cut-1] == '%':
		cut--
	case enc[cut-2] == '%':
		cut -= 2
	}
	return enc[:cut] + string(hashMark) + h + Suffix
}

// keyOf returns the key whose lease file is called name. hashed reports a
// long key's name, from which the key cannot be recovered (read the file);
// ok is false for names that are not lease files.
func keyOf(name string) (key string, hashed, ok bool) {
	enc, found := strings.CutSuffix(name, Suffix)
	if !found || enc == "" {
		return "", false, false
	}
	if strings.IndexByte(enc, hashMark) >= 0 {
		return "", true, true
	}
	var b strings.Builder
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(enc) {
			return "", false, false
		}
		hi, lo := strings.IndexByte(hexDigits, enc[i+1]), strings.IndexByte(hexDigits, enc[i+2])
		if hi < 0 || lo < 0 {
			return "", false, false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	key = b.String()
	if fileName(key) != name { // only the canonical encoding names a lease file
		return "", false, false
	}
	return key, false, true
}
