// Package filelease is a host-local lease store (a [driver.Store]): leases
// live in files of one directory, one file per key, and every process of the
// host that uses the directory shares them. No server is needed; exclusion
// between processes is real (flock). It is the CLI's default store. Linux
// only: it relies on flock, CLOCK_MONOTONIC, the kernel's boot id and inotify.
//
//	store, err := filelease.New("/run/myapp/leases") // created 0700 if missing
//	if err != nil { ... }
//	client, err := lease.New(store)
//
// Guarantees:
//   - At most one holder per key among the processes sharing the directory:
//     each operation locks the key's file (flock), reads and checks its
//     record, writes the new record in place and closes the file.
//   - A new writer's fence is the file's fence + 1, on disk (fdatasync) before
//     Acquire returns it. Files are never deleted (Release keeps the fence), so
//     fences increase strictly across processes, crashes and reboots.
//   - Expiry is judged by CLOCK_MONOTONIC, which wall-clock changes never move
//     and which is the clock of the Client's own deadline; each file records
//     the boot id too, so a reboot expires every lease. A holder that is
//     killed or stopped loses its lease TTL after its last renewal, and flock
//     locks die with their process.
//   - FIFO: a key's queue of waiters lives in its file, under the same lock
//     and checksum; at most [MaxWaiters] live waiters ([WithMaxWaiters]).
//   - Shared holds (Caps.Shared): a key's readers live in its file too, each
//     with its token, holder and expiry. A reader joining live readers gets
//     their fence; the first reader of an epoch, like every writer, the
//     file's fence + 1.
//   - List reads the directory's names (each page reads them again) and at
//     most 4×limit files a page, in file-name order; Break rewrites the
//     key's file under its lock, keeping the fence and the queue, with a
//     tombstone per evicted token until its hold would have expired.
//   - [Store.Subscribe] announces releases: Release touches the file, inotify
//     wakes subscribers in every process, and Announcement.Next is the head
//     of the key's queue as the file says, if it waits to write.
//
// Key K lives in Dir/esc(K)+".lease", where esc percent-escapes every byte
// outside [A-Za-z0-9._-] and a leading '.' (names over 255 bytes end in '~'
// and the key's SHA-256): no key names a file outside the directory. A file
// is a short text record ending in the CRC-32C of the lines before it:
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
// Strings are Go-quoted, expires is in CLOCK_MONOTONIC nanoseconds of that
// boot, and bytes after the crc32c line are ignored. While waiters are queued
// the record is v2: after expires come queue-boot "…", waiters N and N lines
// waiter "TOKEN" EXPIRES in arrival order. While readers hold the key or a
// waiter waits to read, it is v3: v2 with " shared" ending a reader's waiter
// line, then readers M and M lines reader "TOKEN" EXPIRES "HOLDER" (the
// writer's token and holder empty, the readers' expiries under boot). While
// a Break's tombstones live it is v4: v3, then broken K and K lines broken
// "TOKEN" EXPIRES (under queue-boot). v1 to v3 are still written when they
// suffice, and all four are read. A file
// that does not parse, fails its checksum or records another key makes every
// operation on the key fail with [ErrCorrupt]: it is never free. To recover,
// stop using the key and delete the file (its fence restarts at 1). A token
// or holder that is over-long or does not parse is no corruption: that lease
// lapses at its expiry.
//
// [New] refuses with [ErrUnsafeDir] a directory another user could take over:
// a symbolic link, one owned by another user (root aside), or one its group
// or everyone can write to unless [WithFileMode] shares the files as widely.
// It creates missing directories 0700 and lease files 0600, and refuses NFS
// and SMB. Why CLOCK_MONOTONIC, what is synced, and the caveats (suspend,
// time namespaces, flock and ctx): docs/stores.md, "File store".
package filelease
