// Lease object names: keys mapped to DNS subdomain names.

package k8slease

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// maxPrefix is the longest name prefix.
const maxPrefix = 100

// name is key's Lease object name: prefix+key when that is a valid name,
// else prefix, key's letters, digits and dashes (lowercased, at most 100) and 16
// hex digits of its SHA-256. The object keeps the key whole, and every
// operation checks it, so two keys never share an object unnoticed.
func (s *Store) name(key string) string {
	if n := s.prefix + key; len(validation.IsDNS1123Subdomain(n)) == 0 {
		return n
	}
	var b strings.Builder
	for _, c := range strings.ToLower(key) {
		if b.Len() < 100 && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b.WriteRune(c)
		}
	}
	clean := strings.Trim(strings.ReplaceAll(b.String(), ".", "-"), "-")
	if clean == "" {
		clean = "k"
	}
	sum := sha256.Sum256([]byte(key))
	return s.prefix + clean + "-" + hex.EncodeToString(sum[:8])
}

// checkPrefix checks that names made with prefix are valid.
func checkPrefix(prefix string) error {
	if prefix != "" && (len(prefix) > maxPrefix || len(validation.IsDNS1123Subdomain(prefix+"x")) > 0) {
		return lease.Invalid("prefix", "%q is not lowercase letters, digits, '-' and '.' of at most %d bytes", prefix, maxPrefix)
	}
	return nil
}

// digest is the store label's value for prefix.
func digest(prefix string) string {
	sum := sha256.Sum256([]byte(prefix))
	return "p" + hex.EncodeToString(sum[:10])
}

// waiterName is the name of r.Token's waiter object for r.Key.
func (s *Store) waiterName(r driver.Request) string {
	sum := sha256.Sum256([]byte(s.name(r.Key) + " " + r.Token))
	return s.prefix + "w-" + hex.EncodeToString(sum[:16])
}
