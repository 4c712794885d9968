// Helpers shared by the scheme files.

package leaseurl

import (
	"net/url"
	"strings"
)

func lowerScheme(u *url.URL) string { return strings.ToLower(u.Scheme) }

// hostList splits a URL host of the form "h1:p1,h2:p2" into its endpoints,
// adding defaultPort to those without one.
func hostList(host, defaultPort string) []string {
	var out []string
	for _, h := range strings.Split(host, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if !strings.Contains(strings.TrimPrefix(h, "["), ":") || strings.HasSuffix(h, "]") {
			h += ":" + defaultPort
		}
		out = append(out, h)
	}
	return out
}

// oneLine joins the lines of an error message with "; " (" " after a line
// ending in ':'), leaving out blank and repeated ones: pgx's connection
// errors list every address tried, one per line, the same one twice when it
// retried without TLS.
func oneLine(msg string) string {
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
