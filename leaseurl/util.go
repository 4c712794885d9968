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
