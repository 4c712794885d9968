//go:build linux

// The lease file format: a small versioned text record protected by a
// CRC-32C (v1: the lease; v2: the lease and its queue of waiters), and
// ErrCorrupt for files that do not parse.

package filelease

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/fifo"
)

// ErrCorrupt is matched by the error of every operation on a lease file that
// fails its checksum or whose key, fence, boot, expiry or queue does not
// parse. Such a key is never treated as free: nobody can acquire it until an
// operator removes the file by hand (which resets its fence; see the package
// documentation). An unreadable token or holder alone is not corruption.
var ErrCorrupt = errors.New("filelease: corrupt lease file")

// The first line of a lease file names its format version. A record without
// waiters is written as v1, the format of stores that have no queue, so that
// older processes sharing the directory keep working on such keys; a record
// with waiters is written as v2 (v1 followed by the queue). Both are read.
const (
	magicV1 = "leasekit-file-lease v1"
	magicV2 = "leasekit-file-lease v2"
)

// maxFileSize bounds the bytes read of a record's lines other than its
// token and holder: a v1 record is well under 4 KiB, a v2 record with
// MaxWaiters waiters of maxTokenLen-byte tokens about 150 KiB. The token and
// holder lines are read whatever their length, keeping at most
// maxQuotedLen(the field's limit) bytes in memory, so that an over-long one
// never hides the record's expiry (see unknownToken).
const maxFileSize = 1 << 20

// unknownToken stands for a token that is over-long (more than maxTokenLen
// bytes) or does not parse, in a record whose checksum holds. No request can
// carry it (check refuses tokens over maxTokenLen), so such a lease is held
// by nobody who can renew or release it, and lapses at its expiry.
var unknownToken = strings.Repeat("?", maxTokenLen+1)

// maxQuotedLen is the longest Go-quoted form of a string of n bytes
// (strconv.Quote writes each byte as at most 4: \x00).
func maxQuotedLen(n int) int { return 4*n + 2 }

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

// waiter is one queued token and when its entry expires, in CLOCK_MONOTONIC
// nanoseconds of QueueBoot.
type waiter = fifo.Waiter

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

// parse decodes a lease file from rd. Bytes after the checksum line are not
// read: they are the tail of a longer earlier record, left when a writer died
// between writing a record and cutting the file to its length.
//
// The lines that say whether the key is held, until when and with which fence
// (magic, key, fence, boot, expires, the queue) must parse, and the checksum
// must hold, or the file is corrupt. The token and holder are only compared
// and shown: an over-long or unparseable one is read as unknownToken or a
// placeholder holder, so that the lease lapses at its expiry like any other.
func parse(rd *bufio.Reader) (record, error) {
	var r record
	p := parser{rd: rd}
	line := p.line()
	if p.err != nil {
		return r, p.err
	}
	if line != magicV1 && line != magicV2 {
		return r, corrupt("first line %q, want %q or %q", clip(line), magicV1, magicV2)
	}
	r.Key = p.quoted("key")
	r.Fence = p.uint("fence")
	token, tokenOK, _ := p.loose("token", maxTokenLen)
	holder, holderOK, holderLen := p.loose("holder", lease.MaxHolderLen)
	r.Boot = p.quoted("boot")
	expires := p.uint("expires")
	if line == magicV2 {
		r.QueueBoot = p.quoted("queue-boot")
		r.Queue = p.waiters()
	}
	want := p.crc
	sum := p.field("crc32c")
	if p.err != nil {
		return record{}, p.err
	}
	got, err := strconv.ParseUint(sum, 16, 32)
	if err != nil || len(sum) != 8 {
		return record{}, corrupt("bad checksum field %q", clip(sum))
	}
	if uint32(got) != want {
		return record{}, corrupt("checksum %08x, content has %08x (torn or edited write)", got, want)
	}
	if expires > 1<<63-1 {
		return record{}, corrupt("expiry %d out of range", expires)
	}
	r.Expires = int64(expires)
	r.Token, r.Holder = token, holder
	if !tokenOK {
		r.Token = unknownToken
	}
	if !holderOK {
		r.Holder = fmt.Sprintf("(unreadable holder of %d bytes)", holderLen)
	}
	if r.Token == "" && (r.Holder != "" || r.Expires != 0) {
		return record{}, corrupt("holder or expiry without a token")
	}
	return r, nil
}

// parser reads the fixed sequence of lines of a record and the CRC-32C of
// the lines read so far; the first error sticks.
type parser struct {
	rd   *bufio.Reader
	pos  int64 // bytes read
	used int   // bytes read of lines counted against maxFileSize
	crc  uint32
	err  error
}

// read reads one line and returns at most keep bytes of it (without the
// newline) and its full length. Bytes beyond keep are checksummed and
// dropped.
func (p *parser) read(keep int) (kept []byte, n int) {
	if p.err != nil {
		return nil, 0
	}
	for {
		chunk, err := p.rd.ReadSlice('\n')
		p.crc = crc32.Update(p.crc, castagnoli, chunk)
		p.pos += int64(len(chunk))
		n += len(chunk)
		if room := keep - len(kept); room > 0 {
			kept = append(kept, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case err == nil:
			if len(kept) > n-1 {
				kept = kept[:n-1]
			}
			return kept, n - 1
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			p.err = corrupt("truncated at byte %d", p.pos)
		default:
			p.err = err
		}
		return nil, 0
	}
}

// line reads a line counted against maxFileSize.
func (p *parser) line() string {
	kept, n := p.read(maxFileSize - p.used + 1)
	p.used += n + 1
	if p.err == nil && p.used > maxFileSize {
		p.err = corrupt("more than %d bytes besides the token and holder, more than a lease record can have", maxFileSize)
	}
	if p.err != nil {
		return ""
	}
	return string(kept)
}

func (p *parser) field(name string) string {
	line := p.line()
	if p.err != nil {
		return ""
	}
	v, ok := strings.CutPrefix(line, name+" ")
	if !ok {
		p.err = corrupt("line %q, want field %q", clip(line), name)
		return ""
	}
	return v
}

// loose reads the string field name, which a record may carry over-long or
// unparseable (see parse): ok is false when its value does not unquote to at
// most max bytes; n is the length of the line.
func (p *parser) loose(name string, max int) (s string, ok bool, n int) {
	prefix := name + " "
	kept, n := p.read(len(prefix) + maxQuotedLen(max) + 1)
	if p.err != nil {
		return "", false, 0
	}
	v, found := strings.CutPrefix(string(kept), prefix)
	if !found {
		p.err = corrupt("line %q, want field %q", clip(string(kept)), name)
		return "", false, 0
	}
	if len(kept) < n || len(v) == 0 || v[0] != '"' {
		return "", false, n
	}
	s, err := strconv.Unquote(v)
	if err != nil || len(s) > max {
		return "", false, n
	}
	return s, true, n
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
