// Package termtext makes text from the store safe to print on a terminal.
package termtext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape returns s with its control characters (C0, DEL, C1) and invalid
// UTF-8 bytes escaped as strconv.Quote would ("\n", "\x1b", "\u009b",
// "\xff"), and everything else, printable Unicode included, unchanged. A
// holder or key is written by whoever can reach the store: raw, it could
// fake lines of the CLI's output ("\nstatus: free") or drive the operator's
// terminal (escape sequences).
func Escape(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
		case control(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe returns the index of the first rune Escape changes, or -1.
func firstUnsafe(s string) int {
	for i, r := range s {
		if control(r) || r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			return i
		}
	}
	return -1
}

func control(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }

// JSON escapes in b, JSON encoded by encoding/json, the DEL and C1
// characters it leaves raw (it escapes only C0) as \u007f to \u009f: the
// decoded values are the same, and a terminal showing the output gets no
// control characters. Outside strings JSON has none of them.
func JSON(b []byte) []byte {
	if !strings.ContainsFunc(string(b), func(r rune) bool { return r >= 0x7f && r <= 0x9f }) {
		return b
	}
	var out []byte
	for _, r := range string(b) {
		if r >= 0x7f && r <= 0x9f {
			out = append(out, `\u00`...)
			out = strconv.AppendUint(out, uint64(r)>>4, 16)
			out = strconv.AppendUint(out, uint64(r)&0xf, 16)
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	return out
}
