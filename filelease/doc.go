// Package filelease is a host-local [lease.Store]: leases live in files of one
// directory, one file per key, and every process of the host that uses the
// directory shares them. No server is needed; exclusion between processes is
// real (flock), and a holder that crashes or is stopped (SIGSTOP) loses its
// lease once its TTL runs out, exactly as with the distributed stores.
//
//	store, err := filelease.New("/run/myapp/leases")
//	if err != nil { ... }
//	client, err := lease.New(store)
//
// The package is Linux-only: it relies on flock, CLOCK_MONOTONIC, the
// kernel's boot id and inotify.
//
// # Files
//
// Key K lives in Dir/esc(K)+".lease", where esc percent-escapes ("%2F") every
// byte outside [A-Za-z0-9._-] and a leading '.'. The name therefore never
// contains '/' or NUL and is never "." or "..": no key can name a file outside
// the directory ("../x" is "%2E.%2Fx.lease"). When the escaped name would be
// longer than 255 bytes, it is cut and followed by '~' and the key's SHA-256
// (esc never leaves a '~'). Every file records its full key, and every
// operation checks it. [Store.File] returns a key's path.
//
// A file holds a small text record:
//
//	leasekit-file-lease v1
//	key "orders"
//	fence 42
//	token "3f9c…"
//	holder "web-1:4711"
//	boot "74c61517-1d76-40e1-80a7-b897aabeb269"
//	expires 81234567890123
//	crc32c 1a2b3c4d
//
// Strings are Go-quoted; expires is in CLOCK_MONOTONIC nanoseconds of the
// boot named by boot; crc32c is the CRC-32C (Castagnoli) of all the lines
// before it. A free key has an empty token and holder and expires 0. Bytes
// after the crc32c line are ignored (the tail of a longer earlier record,
// when a writer died between writing a record and cutting the file).
//
// While waiters are queued for the key (see "Queue of waiters" below) the
// record is written in format v2: the v1 lines, then the queue, all under the
// same checksum:
//
//	leasekit-file-lease v2
//	key "orders"
//	…                                (fence, token, holder, boot, expires)
//	queue-boot "74c61517-1d76-40e1-80a7-b897aabeb269"
//	waiters 2
//	waiter "8d01…" 81234569990123
//	waiter "e7a2…" 81234570120456
//	crc32c 5e6f7a8b
//
// Each waiter line holds a queued token (non-empty, each at most once) and
// the CLOCK_MONOTONIC nanoseconds, of the boot named by queue-boot, when its
// entry expires; the lines are in arrival order. A record without waiters is
// written as v1 again, so processes built before the queue existed keep
// working on keys nobody queues for; they refuse v2 files as corrupt (which
// is safe: never free), so a directory shared with such processes gives them
// ErrCorrupt on a key while waiters of newer processes are queued for it.
// Both versions are read.
//
// Files are created whole (written and synced to a temporary ".*.tmp" file,
// then linked into place) and never deleted: Release clears the token and
// keeps the fence. Each distinct key ever leased leaves a file of a few
// hundred bytes (up to about 60 KiB while [MaxWaiters] waiters are queued). A crash while creating a file may leave a ".*.tmp" file
// behind; it is never read and may be removed.
//
// # Operations
//
// Each operation opens the key's file, takes an flock (shared for Inspect,
// exclusive otherwise), reads and checks the record, decides, writes the new
// record in place if there is one, and closes the file. The lock is held for
// those few system calls only; the store has no goroutines, sleeps or retries.
// flock waits without honouring ctx, which matters only if a process is
// stopped or hangs in the middle of an operation on the same key.
//
// A new fence is synced to disk (fdatasync) before Acquire returns it.
// Renewals and releases are not synced: after a crash of the host every lease
// has expired anyway (see below), and only the fence must survive.
//
// # Fencing tokens
//
// A new holder's fence is the file's fence + 1: strictly increasing for as
// long as the file exists, across processes, crashes and reboots. Acquiring
// again with the token that holds the key keeps the fence and refreshes the
// TTL.
//
// # Expiry and clocks
//
// A lease is held while its token is set, its boot id is the running
// kernel's (/proc/sys/kernel/random/boot_id) and CLOCK_MONOTONIC is before
// its expiry. CLOCK_MONOTONIC is shared by every process of the host and is
// never stepped: setting the wall clock, NTP steps or a changed time zone do
// not move any lease. It is also the clock of the lease Client's own deadline
// (Go's timers and time.Now's monotonic reading use it), so the store and the
// holder measure the TTL identically. CLOCK_BOOTTIME was rejected for that
// reason: it keeps running while the host is suspended when CLOCK_MONOTONIC
// (and the Client) do not, so after a resume the store would have expired a
// lease whose holder still believes it has most of its TTL left, and a second
// holder could acquire it. With CLOCK_MONOTONIC a suspend pauses the TTL of
// every lease and of every holder alike.
//
// Both clocks restart at boot, so a file also records the boot id of its
// expiry: a lease written before a reboot counts as expired (its fence stays).
//
// # Queue of waiters
//
// The store is a [lease.Queuer]: a freed key goes to the waiter that has
// waited longest, not to whoever asks first (the releaser included). The
// queue lives in the key's file, read and written under the same flock as
// the lease, so each operation stays one locked read and write:
//
//   - Acquire first drops expired entries. If the key is held by another
//     token, or free but with live waiters queued ahead of the token, it is
//     refused with a *[lease.HeldError] whose Queued counts those waiters
//     (all of them if the token is not queued); with Request.Queue the token
//     is appended to the queue, or its entry is refreshed in place (it keeps
//     its place) to expire TTL from now. Otherwise the key is granted as
//     before and the token leaves the queue.
//   - Release also removes the token's entry (returning lease.ErrNotHeld if
//     the token held nothing); if it removed one while the key is free, it
//     touches the file as a release does, so the next waiter wakes and looks.
//   - Renew and Inspect ignore the queue (Renew keeps it as it is).
//
// Entries expire on the lease's clock: CLOCK_MONOTONIC of the boot named by
// queue-boot; under another boot every entry has expired. A waiter that dies
// therefore delays the others by at most its TTL. A key holds at most
// [MaxWaiters] live waiters, or fewer with [WithMaxWaiters]: queueing one
// more fails with a *lease.QueueFullError (matching [lease.ErrQueueFull]),
// which the lease Client returns from Acquire at once. Tokens
// are at most 128 bytes (the Client's have 32). An emptied queue
// leaves nothing behind: the file is v1 again.
//
// # Failure behaviour
//
//   - A holder that is killed, crashes or is stopped stops renewing; its
//     lease expires TTL after its last renewal and the next holder gets a
//     larger fence. A stopped holder that resumes finds its renewals refused
//     (lease.ErrNotHeld); the Client has already reported the lease lost by
//     its own deadline.
//   - flock locks die with their process: a process killed in the middle of
//     an operation blocks nobody.
//   - A file that does not parse, fails its checksum, is empty or records
//     another key (a torn write after a power loss, a truncation, an edit)
//     makes every operation on that key fail with an error matching
//     [ErrCorrupt]. The key is never treated as free, since its holder and
//     fence are unknown. To recover, make sure no process uses the key and
//     delete the file by hand: the key's fence then restarts at 1, so
//     resources that check fences must be told (or the key renamed).
//   - What decides a key is the record's key, fence, boot, expiry, queue
//     and whether its token is empty; those must parse. The token's and
//     holder's contents are only compared and shown, so a record whose
//     checksum holds but whose token (over 128 bytes) or holder (over
//     [lease.MaxHolderLen]) is over-long or does not parse is not corrupt:
//     it is a lease of a token no request can carry, with an
//     "(unreadable holder of N bytes)", and it lapses at its expiry like
//     any other lease. The store never writes such a record (Acquire
//     refuses such tokens and holders with lease.ErrInvalid); whoever can
//     write the files can, and must not be able to block a key for longer
//     than the TTL written. The file is read whatever its length; only the
//     token and holder may make it longer than 1 MiB.
//   - Deleting or replacing a lease file while it is in use breaks the
//     guarantees for that key (the fence restarts; a process holding the old
//     file's lock excludes nobody).
//
// # Release announcements
//
// The store is a [lease.Notifier]: [Store.Subscribe] watches the directory
// with inotify, and Release touches the file's times (IN_ATTRIB), so a waiter
// in any process wakes within a millisecond or so of a release (or of a
// queued waiter giving up on a free key). Acquisitions, renewals and queueing
// do not wake waiters; expiries are not announced (the Client waits for the
// holder's TTL, and queued waiters look again at least every TTL/3).
//
// # The directory
//
// Whoever controls the directory can read every holder's token and replace
// its files, so [New] refuses, with an error matching [ErrUnsafeDir], a
// directory another user could take over: a symbolic link (the last
// component), a directory owned by another user than the process's (or
// root), or one its group or everyone can write to, sticky or not, unless
// [WithFileMode] shares the lease files as widely. Missing directories are
// created 0700 and lease files 0600 (by default).
//
// # Limits and caveats
//
// The directory must be on a local file system of one host: New refuses NFS
// and SMB/CIFS, where flock and the boot id would not be shared. Containers
// of one host may share a directory (they share the kernel, hence the clock
// and boot id), but processes in different time namespaces (unshare --time,
// some checkpoint/restore tools) must not, since their monotonic clocks
// differ. Processes of different users share leases only if they can all
// read and write the files (WithFileMode(0o660) and a common group), and
// the directory belongs to that group (or to the process's user or root).
// Keys are at most 512 bytes ([MaxKeyLen]); TTLs at least 1ms ([MinTTL]).
package filelease
