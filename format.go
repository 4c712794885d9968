package lease

import (
	"fmt"
	"log/slog"
	"strconv"
)

// A Lease printed or logged by mistake must not give away its
// token, which renews and releases the lease: String, Format (every verb,
// %+v and %#v included) and LogValue show only its first 8 characters.

// String returns the lease's key, fence, holder and shortened token, e.g.
// lease{key="jobs" fence=7 holder="host:42" token=3f9c0a1b…}.
func (l *Lease) String() string {
	if l == nil {
		return "<nil>"
	}
	return fmt.Sprintf("lease{key=%q fence=%d holder=%q token=%s}", l.req.Key, l.fence, l.p.holder, short(l.req.Token))
}

// Format implements fmt.Formatter so that every verb prints String, never
// the fields (and the full token) as fmt would by default; %q quotes it.
func (l *Lease) Format(s fmt.State, verb rune) { format(s, verb, l.String()) }

// LogValue implements slog.LogValuer: a group of key, fence, holder and the
// shortened token.
func (l *Lease) LogValue() slog.Value {
	if l == nil {
		return slog.StringValue("<nil>")
	}
	return slog.GroupValue(
		slog.String("key", l.req.Key),
		slog.Uint64("fence", l.fence),
		slog.String("holder", l.p.holder),
		slog.String("token", short(l.req.Token)),
	)
}

func format(s fmt.State, verb rune, str string) {
	if verb == 'q' {
		str = strconv.Quote(str)
	}
	_, _ = fmt.Fprint(s, str)
}
