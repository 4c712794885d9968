//go:build linux

// The queue of waiters in the lease file: v1 records (no queue) are still
// read and written while no waiter is queued, v2 records carry the queue
// under the checksum, a reboot expires every waiter, the queue is bounded,
// and a waiter that gives up on a free key is announced.

package filelease_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/filelease"
	"golang.org/x/sys/unix"
)

// queueAcquire asks s to acquire r with Request.Queue and returns the
// *lease.HeldError it must be refused with.
func queueAcquire(t *testing.T, s *filelease.Store, r lease.Request) *lease.HeldError {
	t.Helper()
	r.Queue = true
	_, err := s.Acquire(testCtx(t, 10*time.Second), r)
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("queued Acquire(%q) for %s = %v, want a *lease.HeldError", r.Key, r.Holder, err)
	}
	return he
}

// firstLine returns the first line of key's lease file.
func firstLine(t *testing.T, s *filelease.Store, key string) string {
	t.Helper()
	data, err := os.ReadFile(s.File(key))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	return string(line)
}

// sealed appends the crc32c line of body, as the documented format has it.
func sealed(body string) []byte {
	return fmt.Appendf([]byte(body), "crc32c %08x\n", crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
}

func bootID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func monoNow(t *testing.T) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestQueueFileVersions: a record is written as v1 while no waiter is queued
// and as v2 (with the queue) while one is, by any store of the directory;
// once the queue empties the file is v1 again.
func TestQueueFileVersions(t *testing.T) {
	s1 := newStore(t, "")
	s2 := newStore(t, s1.Dir())
	ctx := testCtx(t, 10*time.Second)
	key := "versions-" + randHex(4)
	a, b := req(key, "A", time.Minute), req(key, "B", time.Minute)
	mustAcquire(t, s1, a)
	if got := firstLine(t, s1, key); got != "leasekit-file-lease v1" {
		t.Fatalf("held without waiters: first line %q, want v1", got)
	}
	if he := queueAcquire(t, s2, b); he.Queued != 0 || he.Holder != "A" {
		t.Fatalf("B's queued Acquire: %+v, want held by A with 0 ahead", he)
	}
	data, err := os.ReadFile(s1.File(key))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"leasekit-file-lease v2\n", "queue-boot " + strconv.Quote(bootID(t)) + "\n", "waiters 1\n", "waiter " + strconv.Quote(b.Token) + " "} {
		if !bytes.Contains(data, []byte(want)) {
			t.Fatalf("with B queued the file lacks %q:\n%s", want, data)
		}
	}
	// The holder's renewal keeps the queue.
	if err := s1.Renew(ctx, a); err != nil {
		t.Fatalf("A's Renew: %v", err)
	}
	if err := s1.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	if _, err := s1.Acquire(ctx, req(key, "newcomer", time.Minute)); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("newcomer's Acquire with B queued after the renewal and release: %v, want ErrHeld", err)
	}
	mustAcquire(t, s2, b)
	if got := firstLine(t, s1, key); got != "leasekit-file-lease v1" {
		t.Fatalf("after B acquired (queue empty): first line %q, want v1", got)
	}
}

// TestV1FilesStillRead: files in the v1 format of a store without a queue,
// written by hand here, are read as the leases they record: neither corrupt
// nor free when held.
func TestV1FilesStillRead(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 10*time.Second)
	held, free := "v1-held-"+randHex(4), "v1-free-"+randHex(4)
	token := randHex(16)
	v1 := func(key string, fence int, token, holder, boot string, expires int64) []byte {
		return sealed(fmt.Sprintf("leasekit-file-lease v1\nkey %q\nfence %d\ntoken %q\nholder %q\nboot %q\nexpires %d\n",
			key, fence, token, holder, boot, expires))
	}
	if err := os.WriteFile(s.File(held), v1(held, 5, token, "old:1", bootID(t), monoNow(t)+int64(time.Hour)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.File(free), v1(free, 7, "", "", "", 0), 0o600); err != nil {
		t.Fatal(err)
	}

	info, err := s.Inspect(ctx, held)
	if err != nil || !info.Held || info.Fence != 5 || info.Holder != "old:1" {
		t.Fatalf("Inspect of a held v1 file = %+v, %v; want held by old:1 with fence 5", info, err)
	}
	if _, err := s.Acquire(ctx, req(held, "intruder", time.Minute)); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire of a held v1 file by another token: %v, want ErrHeld", err)
	}
	w := req(held, "waiter", time.Minute)
	if he := queueAcquire(t, s, w); he.Queued != 0 || he.Fence != 5 {
		t.Fatalf("queued Acquire on a held v1 file: %+v, want fence 5 and 0 ahead", he)
	}
	holder := lease.Request{Key: held, Token: token, Holder: "old:1", TTL: time.Minute}
	if err := s.Renew(ctx, holder); err != nil {
		t.Fatalf("Renew by the v1 file's holder: %v", err)
	}
	if err := s.Release(ctx, holder); err != nil {
		t.Fatalf("Release by the v1 file's holder: %v", err)
	}
	if f := mustAcquire(t, s, w); f != 6 {
		t.Errorf("the waiter's fence after the v1 holder released: %d, want 6", f)
	}

	info, err = s.Inspect(ctx, free)
	if err != nil || info.Held || info.Fence != 7 {
		t.Fatalf("Inspect of a free v1 file = %+v, %v; want free with fence 7", info, err)
	}
	if f := mustAcquire(t, s, req(free, "new", time.Minute)); f != 8 {
		t.Errorf("fence over a free v1 file with fence 7: %d, want 8", f)
	}
}

// TestQueueRebootExpires: waiters recorded under another boot id have all
// expired, like a lease from before a reboot.
func TestQueueRebootExpires(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 10*time.Second)
	key := "queue-reboot-" + randHex(4)
	a := req(key, "A", time.Hour)
	mustAcquire(t, s, a)
	queueAcquire(t, s, req(key, "B", time.Hour))
	queueAcquire(t, s, req(key, "C", time.Hour))
	rewriteField(t, s.File(key), "queue-boot", strconv.Quote("00000000-0000-4000-8000-000000000000"))
	if he := queueAcquire(t, s, req(key, "D", time.Hour)); he.Queued != 0 {
		t.Fatalf("after the simulated reboot of the waiters: %d queued ahead of a newcomer, want 0", he.Queued)
	}
	if err := s.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	// D, queued under this boot, is first: B and C are gone.
	if _, err := s.Acquire(ctx, req(key, "E", time.Minute)); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("E's Acquire with D queued: %v, want ErrHeld", err)
	}
}

// TestQueueBounded: a key queues at most MaxWaiters waiters; queued ones keep
// their places, new ones get ErrQueueFull, and the file stays readable.
func TestQueueBounded(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, time.Minute)
	key := "bounded-" + randHex(4)
	mustAcquire(t, s, req(key, "A", time.Hour))
	var ws []lease.Request
	for i := range filelease.MaxWaiters {
		w := req(key, fmt.Sprint("w", i), time.Hour)
		ws = append(ws, w)
		if he := queueAcquire(t, s, w); he.Queued != i {
			t.Fatalf("waiter %d: %d queued ahead, want %d", i, he.Queued, i)
		}
	}
	over := req(key, "one too many", time.Hour)
	over.Queue = true
	_, err := s.Acquire(ctx, over)
	if !errors.Is(err, filelease.ErrQueueFull) || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("queued Acquire beyond %d waiters: %v, want ErrQueueFull (not ErrHeld)", filelease.MaxWaiters, err)
	}
	t.Logf("beyond the bound: %v", err)
	last := filelease.MaxWaiters - 1
	if he := queueAcquire(t, s, ws[last]); he.Queued != last {
		t.Fatalf("refresh of the last waiter in a full queue: %d ahead, want %d", he.Queued, last)
	}
	_, err = s.Acquire(ctx, req(key, "not queued", time.Hour))
	var he *lease.HeldError
	if !errors.As(err, &he) || he.Queued != filelease.MaxWaiters {
		t.Fatalf("unqueued Acquire on a full queue: %v, want a HeldError with %d queued", err, filelease.MaxWaiters)
	}
	if fi, err := os.Stat(s.File(key)); err == nil {
		t.Logf("lease file with %d waiters: %d bytes", filelease.MaxWaiters, fi.Size())
	}
	// Giving up makes room.
	if err := s.Release(ctx, ws[0]); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the first waiter's Release: %v, want ErrNotHeld", err)
	}
	if he := queueAcquire(t, s, over); he.Queued != filelease.MaxWaiters-1 {
		t.Fatalf("queued Acquire after a waiter left: %d ahead, want %d", he.Queued, filelease.MaxWaiters-1)
	}
}

// TestQueueLongTokenInvalid: a token too long to queue is invalid input.
func TestQueueLongTokenInvalid(t *testing.T) {
	s := newStore(t, "")
	r := lease.Request{Key: "long-token-" + randHex(4), Token: strings.Repeat("t", 129), Holder: "x", TTL: time.Minute, Queue: true}
	if _, err := s.Acquire(testCtx(t, 10*time.Second), r); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("queued Acquire with a %d-byte token: %v, want ErrInvalid", len(r.Token), err)
	}
}

// TestGiveUpAnnounced: a waiter's Release removes its entry; on a free key
// (reserved for that waiter) it is announced so that the next waiter looks
// again, while on a held key nothing is announced.
func TestGiveUpAnnounced(t *testing.T) {
	s := newStore(t, "")
	other := newStore(t, s.Dir())
	ctx := testCtx(t, 20*time.Second)
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	key := "giveup-" + randHex(4)
	a, b, c, d := req(key, "A", time.Minute), req(key, "B", time.Minute), req(key, "C", time.Minute), req(key, "D", time.Minute)
	mustAcquire(t, other, a)
	queueAcquire(t, other, b)
	queueAcquire(t, other, c)
	queueAcquire(t, other, d)
	if err := other.Release(ctx, b); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("B gives up while A holds: %v, want ErrNotHeld", err)
	}
	if k, err := nextWithin(t, sub, 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next after a waiter gave up on a held key: %q, %v; want nothing", k, err)
	}
	if err := other.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	if k, err := nextWithin(t, sub, 5*time.Second); err != nil || k != key {
		t.Fatalf("Next after A's Release = %q, %v", k, err)
	}
	// C, first in the queue of a free key, gives up: D must hear of it.
	if err := other.Release(ctx, c); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("C gives up on the free key: %v, want ErrNotHeld", err)
	}
	if k, err := nextWithin(t, sub, 5*time.Second); err != nil || k != key {
		t.Fatalf("Next after C gave up on the free key = %q, %v; want %q", k, err, key)
	}
	if f := mustAcquire(t, s, d); f != 2 {
		t.Errorf("D's fence %d, want 2", f)
	}
	// A Release by a token that is neither holder nor waiter announces nothing.
	if err := other.Release(ctx, req(key, "stranger", time.Minute)); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("a stranger's Release: %v, want ErrNotHeld", err)
	}
	if k, err := nextWithin(t, sub, 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next after a stranger's Release: %q, %v; want nothing", k, err)
	}
}

// TestCorruptQueue: the queue is covered by the checksum, every truncation
// of a v2 file is corrupt, and a queue that breaks the format's rules (a
// token twice, an empty token, fewer waiters than announced) is corrupt even
// with a valid checksum. None is ever treated as a free key.
func TestCorruptQueue(t *testing.T) {
	s := newStore(t, "")
	key := "corrupt-queue-" + randHex(4)
	r := req(key, "holder", time.Minute)
	mustAcquire(t, s, r)
	b, c := req(key, "B", time.Minute), req(key, "C", time.Minute)
	queueAcquire(t, s, b)
	queueAcquire(t, s, c)
	path := s.File(key)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := string(full[:bytes.LastIndex(full, []byte("crc32c "))])
	cases := map[string][]byte{
		"a waiter's token changed without the checksum": bytes.Replace(full, []byte(b.Token), []byte(randHex(16)), 1),
		"the queue boot changed without the checksum":   bytes.Replace(full, []byte("queue-boot \""), []byte("queue-boot \"x"), 1),
		"a token twice":       sealed(strings.Replace(body, c.Token, b.Token, 1)),
		"an empty token":      sealed(strings.Replace(body, strconv.Quote(c.Token), `""`, 1)),
		"a missing waiter":    sealed(strings.Replace(body, "waiters 2\n", "waiters 3\n", 1)),
		"an unquoted token":   sealed(strings.Replace(body, strconv.Quote(c.Token), c.Token, 1)),
		"a bad expiry":        sealed(strings.Replace(body, strconv.Quote(c.Token)+" ", strconv.Quote(c.Token)+" -", 1)),
		"an expiry too large": sealed(strings.Replace(body, strconv.Quote(c.Token)+" ", strconv.Quote(c.Token)+" 99999999999999999999", 1)),
		"no waiters line":     sealed(strings.Replace(body, "waiters 2\n", "", 1)),
	}
	for what, data := range cases {
		if bytes.Equal(data, full) {
			t.Fatalf("%s: the edit changed nothing", what)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, s, r, what)
	}
	for n := range len(full) {
		if err := os.WriteFile(path, full[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, s, r, "v2 file truncated to "+strconv.Itoa(n)+" bytes")
		if t.Failed() {
			t.Fatalf("stopping at truncation %d of %d", n, len(full))
		}
	}
	if err := os.WriteFile(path, full, 0o600); err != nil {
		t.Fatal(err)
	}
	if he := queueAcquire(t, s, c); he.Queued != 1 {
		t.Fatalf("restored v2 file: C has %d ahead, want 1", he.Queued)
	}
}

// TestMaxWaitersInvalid: New refuses a cap of waiters outside 1..MaxWaiters,
// and WithMaxWaiters(2) refuses a third waiter with a *QueueFullError.
func TestMaxWaitersInvalid(t *testing.T) {
	for _, n := range []int{0, -1, filelease.MaxWaiters + 1} {
		if _, err := filelease.New(t.TempDir(), filelease.WithMaxWaiters(n)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("WithMaxWaiters(%d): %v, want ErrInvalid", n, err)
		}
	}
	s, err := filelease.New(t.TempDir(), filelease.WithMaxWaiters(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := "cap-" + randHex(4)
	mustAcquire(t, s, req(key, "A", time.Hour))
	queueAcquire(t, s, req(key, "w0", time.Hour))
	w1 := req(key, "w1", time.Hour)
	queueAcquire(t, s, w1)
	over := req(key, "w2", time.Hour)
	over.Queue = true
	_, err = s.Acquire(testCtx(t, 10*time.Second), over)
	var qf *lease.QueueFullError
	if !errors.As(err, &qf) || qf.Max != 2 || !errors.Is(err, lease.ErrQueueFull) {
		t.Fatalf("third waiter: %v, want a *QueueFullError with Max 2", err)
	}
	queueAcquire(t, s, w1) // a queued waiter that re-asks keeps its place
}
