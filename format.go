package lease

import (
	"fmt"
	"log/slog"
)

// A Lease printed or logged by mistake must not give away its
// token, which renews and releases the lease: String, Format (every verb,
// %+v and %#v included) and LogValue show only its first 8 characters.

// String returns the lease's key, fence, holder and shortened token.
func (l *Lease) String() string {
	if l == nil {
		return "<nil>"
	}
	return fmt.Sprintf("lease{key=%q fence=%d holder=%q token=%s}", l.req.Key, l.fence, l.p.holder, short(l.req.Token))
}

// Format prints String for every verb.
func (l *Lease) Format(s fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = fmt.Fprintf(s, "%q", l.String())
		return
	}
	_, _ = fmt.Fprint(s, l.String())
}

// LogValue logs what String prints.
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
