//go:build linux

// The lease file format (see the package documentation) and ErrCorrupt.

package filelease

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/fifo"
)

// ErrCorrupt is matched by the error of every operation on a lease file that
// fails its checksum, does not parse or records another key. Such a key is
// never free: nobody can acquire it until the file is removed by hand. It
// matches lease.ErrCorrupt too.
var ErrCorrupt error = corruptFile{}

// corruptFile is ErrCorrupt: a lease.ErrCorrupt of the file store.
type corruptFile struct{}

func (corruptFile) Error() string { return "filelease: corrupt lease file" }

// Unwrap returns lease.ErrCorrupt.
func (corruptFile) Unwrap() error { return lease.ErrCorrupt }

// maxFile is the longest file read; a longer one is corrupt.
const maxFile = 16 << 20

// unreadable stands for a token that is over-long or does not parse: no
// Client's token, so nobody can renew or release such a lease.
const unreadable = "(unreadable)"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is the content of a lease file. A free key has an empty Token and
// no Readers, and keeps its last Fence. Readers hold it shared, under Boot's
// clock, with Token empty and the Fence of their read epoch.
type record struct {
	Key, Token, Holder string
	Fence              uint64
	Boot               string // boot id of the clock of Expires and the readers'
	Expires            int64  // CLOCK_MONOTONIC nanoseconds
	Readers            []reader
	QueueBoot          string // boot id of the clock of the waiters' and tombstones' expiries
	Queue              []fifo.Waiter
	Broken             []tomb
}

// tomb is the tombstone of a hold a Break evicted: until Expires, when the
// hold would have expired, renewing Token fails with lease.ErrBroken.
type tomb struct {
	Token   string
	Expires int64
}

// reader is one shared holder of a key.
type reader struct {
	Token, Holder string
	Expires       int64
}

// held reports whether r's writer holds a live lease at monotonic time now
// of boot.
func (r record) held(now int64, boot string) bool {
	return r.Token != "" && r.Boot == boot && now < r.Expires
}

// live returns r without its expired readers and waiters (all of them under
// another boot), in new slices, its queue recorded under boot.
func (r record) live(now int64, boot string) record {
	if r.Boot != boot {
		r.Readers = nil
	}
	if r.QueueBoot != boot {
		r.Queue, r.Broken = nil, nil
	}
	r.Readers = slices.DeleteFunc(slices.Clone(r.Readers), func(rd reader) bool { return now >= rd.Expires })
	r.Broken = slices.DeleteFunc(slices.Clone(r.Broken), func(b tomb) bool { return now >= b.Expires })
	r.Queue, r.QueueBoot = fifo.Live(r.Queue, now), boot
	return r
}

// next is the token the key goes to next: its writer, else the queue's head
// if it is exclusive, else "" (shared waiters all look).
func (r record) next(now int64, boot string) string {
	if r.held(now, boot) {
		return r.Token
	}
	return fifo.Next(r.live(now, boot).Queue)
}

// broken reports whether live record r has a tombstone of token.
func (r record) broken(token string) bool {
	return slices.ContainsFunc(r.Broken, func(b tomb) bool { return b.Token == token })
}

// encode writes v1 without waiters, the format before the queue, v2 without
// readers or shared waiters, the format before shared holds, and v3 without
// tombstones, so that older processes keep working on keys nobody queues
// for, shares or breaks.
func (r record) encode() []byte {
	var b bytes.Buffer
	magic := "v1"
	switch {
	case len(r.Broken) > 0:
		magic = "v4"
	case len(r.Readers) > 0 || slices.ContainsFunc(r.Queue, func(w fifo.Waiter) bool { return w.Shared }):
		magic = "v3"
	case len(r.Queue) > 0:
		magic = "v2"
	}
	fmt.Fprintf(&b, "leasekit-file-lease %s\nkey %q\nfence %d\ntoken %q\nholder %q\nboot %q\nexpires %d\n",
		magic, r.Key, r.Fence, r.Token, r.Holder, r.Boot, r.Expires)
	if magic != "v1" {
		fmt.Fprintf(&b, "queue-boot %q\nwaiters %d\n", r.QueueBoot, len(r.Queue))
		for _, w := range r.Queue {
			fmt.Fprintf(&b, "waiter %q %d", w.Token, w.Expires)
			if w.Shared {
				b.WriteString(" shared")
			}
			b.WriteByte('\n')
		}
	}
	if magic == "v3" || magic == "v4" {
		fmt.Fprintf(&b, "readers %d\n", len(r.Readers))
		for _, rd := range r.Readers {
			fmt.Fprintf(&b, "reader %q %d %q\n", rd.Token, rd.Expires, rd.Holder)
		}
	}
	if magic == "v4" {
		fmt.Fprintf(&b, "broken %d\n", len(r.Broken))
		for _, t := range r.Broken {
			fmt.Fprintf(&b, "broken %q %d\n", t.Token, t.Expires)
		}
	}
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

// parse reads a record; bytes after its checksum line are ignored (the tail
// of a longer record, when a writer died before cutting the file).
func parse(data []byte) (record, error) {
	var r record
	end := bytes.Index(data, []byte("\ncrc32c ")) + 1
	sumLine, _, complete := bytes.Cut(data[end:], []byte("\n"))
	if want := fmt.Sprintf("crc32c %08x", crc32.Checksum(data[:end], castagnoli)); end == 0 || !complete || string(sumLine) != want {
		return r, corrupt("checksum line %.40q, want %q (torn, truncated or edited)", sumLine, want)
	}
	// A missing line reads as "" and fails its scan, or the count below.
	lines := strings.Split(string(data[:end-1]), "\n")
	line := func(i int) string {
		if i < len(lines) {
			return lines[i]
		}
		return ""
	}
	var err error
	scan := func(i int, format string, v ...any) {
		if _, e := fmt.Sscanf(line(i), format, v...); err == nil && e != nil {
			err = corrupt("line %.40q, want %q", line(i), format)
		}
	}
	var magic string
	var n, m, o int
	scan(0, "leasekit-file-lease %s", &magic)
	scan(1, "key %q", &r.Key)
	scan(2, "fence %d", &r.Fence)
	r.Token, r.Holder = loose(line(3), "token", 128), loose(line(4), "holder", lease.MaxHolderLen)
	scan(5, "boot %q", &r.Boot)
	scan(6, "expires %d", &r.Expires)
	v3 := magic == "v3" || magic == "v4"
	if magic == "v2" || v3 {
		scan(7, "queue-boot %q", &r.QueueBoot)
		scan(8, "waiters %d", &n)
		r.Queue = make([]fifo.Waiter, max(0, min(n, len(lines))))
		for i := range r.Queue { // not by scan, which is slow: a queue has up to MaxWaiters lines
			w := &r.Queue[i]
			var rest string
			w.Token, w.Expires, rest, err = entry(line(9+i), "waiter", err)
			w.Shared = rest == "shared" && v3
			if rest != "" && !w.Shared && err == nil {
				err = corrupt("line %.40q, want a waiter", line(9+i))
			}
		}
		n += 2
	}
	if v3 {
		scan(7+n, "readers %d", &m)
		r.Readers = make([]reader, max(0, min(m, len(lines))))
		for i := range r.Readers {
			rd := &r.Readers[i]
			var holder string
			rd.Token, rd.Expires, holder, err = entry(line(8+n+i), "reader", err)
			rd.Holder = unquote(holder, lease.MaxHolderLen)
			if len(rd.Token) > 128 {
				rd.Token = unreadable
			}
		}
		m++
	}
	if magic == "v4" {
		scan(7+n+m, "broken %d", &o)
		r.Broken = make([]tomb, max(0, min(o, len(lines))))
		for i := range r.Broken {
			t := &r.Broken[i]
			var rest string
			t.Token, t.Expires, rest, err = entry(line(8+n+m+i), "broken", err)
			if rest != "" && err == nil {
				err = corrupt("line %.40q, want a tombstone", line(8+n+m+i))
			}
		}
		o++
	}
	if err == nil && (len(lines) != 7+n+m+o || magic != "v1" && magic != "v2" && !v3) {
		err = corrupt("%d lines, format %.40q", len(lines), magic)
	}
	return r, err
}

// entry reads a waiter's or reader's line, prefix "TOKEN" EXPIRES[ REST],
// unless err is set already: a line that does not parse sets it.
func entry(line, prefix string, err error) (token string, expires int64, rest string, _ error) {
	v, ok := strings.CutPrefix(line, prefix+" ")
	q, e := strconv.QuotedPrefix(v)
	if ok && e == nil {
		token, _ = strconv.Unquote(q)
		var num string
		num, rest, _ = strings.Cut(strings.TrimPrefix(v[len(q):], " "), " ")
		expires, e = strconv.ParseInt(num, 10, 64)
	}
	if (!ok || e != nil) && err == nil {
		err = corrupt("line %.40q, want a %s", line, prefix)
	}
	return token, expires, rest, err
}

// loose reads a token or holder line, which may be over-long or unquoted
// without making the record corrupt: it then reads as unreadable.
func loose(line, name string, max int) string {
	v, ok := strings.CutPrefix(line, name+" ")
	if !ok {
		return unreadable
	}
	return unquote(v, max)
}

// unquote returns the Go-quoted string v, or unreadable if v does not parse
// or is longer than max.
func unquote(v string, max int) string {
	if s, err := strconv.Unquote(v); err == nil && len(s) <= max {
		return s
	}
	return unreadable
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
