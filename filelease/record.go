//go:build linux

// The lease file format (see the package documentation) and ErrCorrupt.

package filelease

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/fifo"
)

// ErrCorrupt is matched by the error of every operation on a lease file that
// fails its checksum, does not parse or records another key. Such a key is
// never free: nobody can acquire it until the file is removed by hand.
var ErrCorrupt = errors.New("filelease: corrupt lease file")

// maxFile is the longest file read; a longer one is corrupt.
const maxFile = 16 << 20

// unreadable stands for a token that is over-long or does not parse: no
// Client's token, so nobody can renew or release such a lease.
const unreadable = "(unreadable)"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is the content of a lease file. A free key has an empty Token and
// keeps its last Fence.
type record struct {
	Key, Token, Holder string
	Fence              uint64
	Boot               string // boot id of the clock of Expires
	Expires            int64  // CLOCK_MONOTONIC nanoseconds
	QueueBoot          string // boot id of the clock of the waiters' expiries
	Queue              []fifo.Waiter
}

// held reports whether r is a live lease at monotonic time now of boot.
func (r record) held(now int64, boot string) bool {
	return r.Token != "" && r.Boot == boot && now < r.Expires
}

// liveQueue returns r's unexpired waiters, in a new slice; under another
// boot every entry has expired.
func (r record) liveQueue(now int64, boot string) []fifo.Waiter {
	if r.QueueBoot != boot {
		return nil
	}
	return fifo.Live(r.Queue, now)
}

// withQueue returns r with queue q, recorded under boot.
func (r record) withQueue(q []fifo.Waiter, boot string) record {
	r.Queue, r.QueueBoot = q, boot
	return r
}

// next is the token the key goes to next: its holder, else the queue's head.
func (r record) next(now int64, boot string) string {
	if r.held(now, boot) {
		return r.Token
	}
	if q := r.liveQueue(now, boot); len(q) > 0 {
		return q[0].Token
	}
	return ""
}

// encode writes v1 without waiters, the format before the queue, so that
// older processes keep working on keys nobody queues for.
func (r record) encode() []byte {
	var b bytes.Buffer
	magic := "v1"
	if len(r.Queue) > 0 {
		magic = "v2"
	}
	fmt.Fprintf(&b, "leasekit-file-lease %s\nkey %q\nfence %d\ntoken %q\nholder %q\nboot %q\nexpires %d\n",
		magic, r.Key, r.Fence, r.Token, r.Holder, r.Boot, r.Expires)
	if len(r.Queue) > 0 {
		fmt.Fprintf(&b, "queue-boot %q\nwaiters %d\n", r.QueueBoot, len(r.Queue))
		for _, w := range r.Queue {
			fmt.Fprintf(&b, "waiter %q %d\n", w.Token, w.Expires)
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
	var n int
	scan(0, "leasekit-file-lease %s", &magic)
	scan(1, "key %q", &r.Key)
	scan(2, "fence %d", &r.Fence)
	r.Token, r.Holder = loose(line(3), "token", 128), loose(line(4), "holder", lease.MaxHolderLen)
	scan(5, "boot %q", &r.Boot)
	scan(6, "expires %d", &r.Expires)
	if magic == "v2" {
		scan(7, "queue-boot %q", &r.QueueBoot)
		scan(8, "waiters %d", &n)
		r.Queue = make([]fifo.Waiter, max(0, min(n, len(lines))))
		for i := range r.Queue { // not by scan, which is slow: a queue has up to MaxWaiters lines
			v, _ := strings.CutPrefix(line(9+i), "waiter ")
			q, e := strconv.QuotedPrefix(v)
			if e == nil {
				r.Queue[i].Token, _ = strconv.Unquote(q)
				r.Queue[i].Expires, e = strconv.ParseInt(strings.TrimPrefix(v[len(q):], " "), 10, 64)
			}
			if e != nil && err == nil {
				err = corrupt("line %.40q, want a waiter", line(9+i))
			}
		}
		n += 2
	}
	if err == nil && (len(lines) != 7+n || magic != "v1" && magic != "v2") {
		err = corrupt("%d lines, format %.40q", len(lines), magic)
	}
	return r, err
}

// loose reads a token or holder line, which may be over-long or unquoted
// without making the record corrupt: it then reads as unreadable.
func loose(line, name string, max int) string {
	v, ok := strings.CutPrefix(line, name+" ")
	if s, err := strconv.Unquote(v); ok && err == nil && len(s) <= max {
		return s
	}
	return unreadable
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
