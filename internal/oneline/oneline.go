// Package oneline turns multi-line error messages into one line, for the
// CLI's and leaseurl's one-line errors.
package oneline

import "strings"

// Join joins the lines of msg with "; " (" " after a line ending in ':'),
// leaving out blank and repeated ones: some drivers' errors span lines (pgx
// lists every address it tried, the same one twice when it retried without
// TLS).
func Join(msg string) string {
	if !strings.Contains(msg, "\n") {
		return msg
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		switch s := b.String(); {
		case s == "":
		case strings.HasSuffix(s, ":"):
			b.WriteString(" ")
		default:
			b.WriteString("; ")
		}
		b.WriteString(l)
	}
	return b.String()
}
