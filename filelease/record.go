//go:build linux

// The lease file format: a small versioned text record protected by a
// CRC-32C (v1: the lease; v2: the lease and its queue of waiters), and
// ErrCorrupt for files that do not parse.

package filelease

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// ErrCorrupt is matched by the error of every operation on a lease file that
// does not parse or fails its checksum. Such a key is never treated as free:
// nobody can acquire it until an operator removes the file by hand (which
// resets its fence; see the package documentation).
var ErrCorrupt = errors.New("filelease: corrupt lease file")

// The first line of a lease file names its format version. A record without
// waiters is written as v1, the format of stores that have no queue, so that
// older processes sharing the directory keep working on such keys; a record
// with waiters is written as v2 (v1 followed by the queue). Both are read.
const (
	magicV1 = "leasekit-file-lease v1"
	magicV2 = "leasekit-file-lease v2"
)

// maxFileSize bounds what is read: a v1 record is well under 4 KiB, a v2
// record with MaxWaiters waiters of 32-character tokens about 64 KiB;
// maxQueueTokenLen keeps the worst case well below this bound.
const maxFileSize = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is the content of a lease file. A free key has an empty Token; its
// Fence is the last one granted.
type record struct {
	Key     string
	Fence   uint64
	Token   string
	Holder  string
	Boot    string // boot id of the kernel whose clock Expires refers to
	Expires int64  // CLOCK_MONOTONIC nanoseconds

	// QueueBoot is the boot id of the kernel whose clock the waiters'
	// expiries refer to (under another boot every waiter has expired).
	QueueBoot string
	// Queue is the key's waiters in arrival order, possibly expired ones;
	// tokens are distinct and non-empty (see queue.go).
	Queue []waiter
}

// waiter is one queued token and when its entry expires.
type waiter struct {
	Token   string
	Expires int64 // CLOCK_MONOTONIC nanoseconds of QueueBoot
}

// held reports whether r is a live lease at monotonic time now of boot.
func (r record) held(now int64, boot string) bool {
	return r.Token != "" && r.Boot == boot && now < r.Expires
}

// encode renders r in the file format: v1 without waiters, v2 with.
func (r record) encode() []byte {
	var b bytes.Buffer
	if len(r.Queue) == 0 {
		b.WriteString(magicV1 + "\n")
	} else {
		b.WriteString(magicV2 + "\n")
	}
	fmt.Fprintf(&b, "key %s\n", strconv.Quote(r.Key))
	fmt.Fprintf(&b, "fence %d\n", r.Fence)
	fmt.Fprintf(&b, "token %s\n", strconv.Quote(r.Token))
	fmt.Fprintf(&b, "holder %s\n", strconv.Quote(r.Holder))
	fmt.Fprintf(&b, "boot %s\n", strconv.Quote(r.Boot))
	fmt.Fprintf(&b, "expires %d\n", r.Expires)
	if len(r.Queue) > 0 {
		fmt.Fprintf(&b, "queue-boot %s\n", strconv.Quote(r.QueueBoot))
		fmt.Fprintf(&b, "waiters %d\n", len(r.Queue))
		for _, w := range r.Queue {
			fmt.Fprintf(&b, "waiter %s %d\n", strconv.Quote(w.Token), w.Expires)
		}
	}
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

// parse decodes a lease file. Bytes after the checksum line are ignored: they
// are the tail of a longer earlier record, left when a writer died between
// writing a record and cutting the file to its length.
func parse(data []byte) (record, error) {
	var r record
	p := parser{data: data}
	line := p.line()
	if p.err != nil {
		return r, p.err
	}
	if line != magicV1 && line != magicV2 {
		return r, corrupt("first line %q, want %q or %q", clip(line), magicV1, magicV2)
	}
	r.Key = p.quoted("key")
	r.Fence = p.uint("fence")
	r.Token = p.quoted("token")
	r.Holder = p.quoted("holder")
	r.Boot = p.quoted("boot")
	expires := p.uint("expires")
	if line == magicV2 {
		r.QueueBoot = p.quoted("queue-boot")
		r.Queue = p.waiters()
	}
	sumEnd := p.pos
	sum := p.field("crc32c")
	if p.err != nil {
		return record{}, p.err
	}
	want, err := strconv.ParseUint(sum, 16, 32)
	if err != nil || len(sum) != 8 {
		return record{}, corrupt("bad checksum field %q", clip(sum))
	}
	if got := crc32.Checksum(data[:sumEnd], castagnoli); uint32(want) != got {
		return record{}, corrupt("checksum %08x, content has %08x (torn or edited write)", want, got)
	}
	if expires > 1<<63-1 {
		return record{}, corrupt("expiry %d out of range", expires)
	}
	r.Expires = int64(expires)
	if r.Token == "" && (r.Holder != "" || r.Expires != 0) {
		return record{}, corrupt("holder or expiry without a token")
	}
	return r, nil
}

// parser reads the fixed sequence of lines of a record; the first error sticks.
type parser struct {
	data []byte
	pos  int
	err  error
}

func (p *parser) line() string {
	if p.err != nil {
		return ""
	}
	i := bytes.IndexByte(p.data[p.pos:], '\n')
	if i < 0 {
		p.err = corrupt("truncated at byte %d of %d", p.pos, len(p.data))
		return ""
	}
	s := string(p.data[p.pos : p.pos+i])
	p.pos += i + 1
	return s
}

func (p *parser) field(name string) string {
	line := p.line()
	if p.err != nil {
		return ""
	}
	v, ok := bytes.CutPrefix([]byte(line), []byte(name+" "))
	if !ok {
		p.err = corrupt("line %q, want field %q", clip(line), name)
		return ""
	}
	return string(v)
}

func (p *parser) quoted(name string) string {
	v := p.field(name)
	if p.err != nil {
		return ""
	}
	s, err := strconv.Unquote(v)
	if err != nil || v[0] != '"' {
		p.err = corrupt("bad %s %q", name, clip(v))
		return ""
	}
	return s
}

func (p *parser) uint(name string) uint64 {
	v := p.field(name)
	if p.err != nil {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		p.err = corrupt("bad %s %q", name, clip(v))
		return 0
	}
	return n
}

// waiters reads the "waiters N" line and the N "waiter TOKEN EXPIRES" lines
// after it. N is not trusted for an allocation: each waiter needs a line of
// its own, so a large N runs out of data and is reported as truncated.
func (p *parser) waiters() []waiter {
	n := p.uint("waiters")
	var q []waiter
	seen := make(map[string]bool)
	for i := uint64(0); i < n && p.err == nil; i++ {
		v := p.field("waiter")
		if p.err != nil {
			return nil
		}
		quoted, err := strconv.QuotedPrefix(v)
		if err != nil || v[0] != '"' {
			p.err = corrupt("bad waiter %q", clip(v))
			return nil
		}
		token, _ := strconv.Unquote(quoted)
		num, ok := strings.CutPrefix(v[len(quoted):], " ")
		expires, err := strconv.ParseUint(num, 10, 64)
		switch {
		case !ok || err != nil || expires > 1<<63-1:
			p.err = corrupt("bad waiter expiry %q", clip(v))
		case token == "":
			p.err = corrupt("waiter with an empty token")
		case seen[token]:
			p.err = corrupt("waiter %q queued twice", clip(token))
		}
		if p.err != nil {
			return nil
		}
		seen[token] = true
		q = append(q, waiter{Token: token, Expires: int64(expires)})
	}
	return q
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
