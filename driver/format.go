// A Request printed or logged by mistake must not give away its token, which
// renews and releases the lease: String, Format (every verb) and LogValue
// show only its first 8 characters.

package driver

import (
	"fmt"
	"log/slog"
	"strconv"
)

// String returns the request's key, holder, TTL and shortened token, e.g.
// request{key="jobs" holder="host:42" ttl=15s token=3f9c0a1b…}.
func (r Request) String() string {
	return fmt.Sprintf("request{key=%q holder=%q ttl=%v token=%s}", r.Key, r.Holder, r.TTL, short(r.Token))
}

// Format implements fmt.Formatter so that every verb prints String, never
// the full token; %q quotes it.
func (r Request) Format(s fmt.State, verb rune) { _, _ = fmt.Fprint(s, quoted(verb, r.String())) }

// LogValue implements slog.LogValuer: a group of key, holder, TTL and the
// shortened token.
func (r Request) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("key", r.Key),
		slog.String("holder", r.Holder),
		slog.Duration("ttl", r.TTL),
		slog.String("token", short(r.Token)),
	)
}

func quoted(verb rune, s string) string {
	if verb == 'q' {
		return strconv.Quote(s)
	}
	return s
}

func short(token string) string {
	if len(token) > 8 {
		return token[:8] + "…"
	}
	return token
}
