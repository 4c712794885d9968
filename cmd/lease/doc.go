// Command lease runs commands under distributed leases with fencing tokens,
// shows, lists, watches and breaks the leases of a store, and tells the
// leasekit story with real processes.
//
//	lease run [flags] KEY [KEY...] -- CMD [ARGS...]
//	lease status [--json] [flags] KEY
//	lease list [--json] [flags] [PREFIX]
//	lease break [-y] [--json] [flags] KEY
//	lease watch [--json] [-i INTERVAL] [flags] [PREFIX]
//	lease demo [flags]
//	lease verify -s URL [--workload W] [--duration D] [--register postgres://...] [--json]
//	lease completion bash|zsh|fish
//
// The command line is parsed by cobra: GNU-style long and short flags
// (-s/--store, -t/--ttl, -n/--slots, -y/--yes, -i/--interval), anywhere
// before "--"; every command's --help has examples. Every flag is also read
// from LEASE_ and its name in capitals (LEASE_STORE, LEASE_TTL,
// LEASE_NO_WAIT) unless given on the command line, except run's --key,
// --holder and --shared (lease run sets LEASE_KEY, LEASE_HOLDER and
// LEASE_SHARED for its command, which may run lease itself) and demo's
// --store. Completion (cobra's, for bash, zsh and fish) offers the store's
// keys, listed within 2 s.
//
// # Stores
//
// -s/--store URL, else $LEASE_STORE, else the per-user file store
// ($XDG_STATE_HOME/leasekit, else ~/.local/state/leasekit, else
// $XDG_CACHE_HOME/leasekit, else $XDG_RUNTIME_DIR/leasekit, else
// /tmp/leasekit-UID; usage and --help print the one in effect; a directory
// other users can write to is refused, see filelease.ErrUnsafeDir). URLs:
// file:///dir, mem://name, redis://[user:pass@]host:port[/db][?prefix=p],
// rediss:// (TLS), postgres://...[?mode=advisory&namespace=ns&table=t],
// etcd://host:port,host:port[/prefix/] (etcds:// for TLS),
// zk://host:port,host:port[/root][?session_timeout=10s],
// nats://[user:pass@]host:port[/bucket][?token=T&namespace=ns] (natss:// for
// TLS). Every URL of a store that queues waiters (all but nats) takes
// max_waiters=N, the cap of each key's queue of waiters (default 1024). See
// package leaseurl. A postgres:// URL without sslmode uses sslmode=verify-full for a
// host that is not loopback (loopback and unix sockets keep pgx's default,
// prefer, which does not verify the certificate); Redis's skip_verify=true
// disables certificate verification. Passwords are never printed: every message, log line and status
// output shows them as "xxxxx".
//
// # Flags
//
// Every duration and count flag is checked before anything starts; a value
// out of range, negative or malformed is a one-line usage error (exit 64).
// lease run: --ttl 10ms to 24h (default 10s), --timeout 0 (no limit, the
// default) or more, --grace 0 (SIGKILL right after SIGTERM) to 24h (default
// 5s). lease status: --timeout 0 (no limit) or more (default 15s). lease
// demo: --ttl 10ms to 1m. lease verify: --duration up to 24h, --ttl 10ms to
// 1m, --workers 1 to 64, --hold 0 (release at once) to 1000.
//
// # lease run
//
// Acquires KEY (waiting while someone else holds it, unless --no-wait or
// until --timeout), then runs CMD in its own process group with LEASE_KEY,
// LEASE_TOKEN, LEASE_FENCE, LEASE_HOLDER and LEASE_TTL_MS in its environment,
// renewing the lease (the heartbeat) until CMD and what it started have
// ended; then it releases the lease. SIGINT, SIGTERM, SIGHUP, SIGQUIT,
// SIGUSR1 and SIGUSR2 sent to lease are forwarded to CMD's process group. If
// the lease is lost while CMD runs, CMD gets SIGTERM, then SIGKILL after
// --grace. If lease itself is killed with kill -9, the lease expires after
// --ttl. Several KEYs are held all or none (Client.AcquireAll); CMD
// then gets LEASE_KEY_COUNT, and LEASE_KEY_i, LEASE_TOKEN_i and
// LEASE_FENCE_i for i from 1, in key order, instead of the three without i.
// --shared takes a reader's lease of one key (Client.AcquireShared): readers
// run side by side, never beside a writer (a lease run without --shared),
// and readers that come after a waiting writer wait behind it; CMD then gets
// LEASE_SHARED=1 and the read epoch's LEASE_FENCE. -n N holds one of N
// slots of the semaphore KEY (Client.AcquireSemaphore): CMD gets the slot's
// key in LEASE_KEY and KEY in LEASE_SEMAPHORE. The old --key KEY (hidden)
// still works, and then CMD may come without "--".
// $LEASE_STORE, whose URL may hold a password, is removed from CMD's
// environment unless --pass-store is given.
//
// On Linux no process of CMD outlives lease run. CMD runs under a supervisor
// process (this binary, as the hidden "lease run-supervisor") that is a
// child subreaper (prctl PR_SET_CHILD_SUBREAPER: Linux 3.4 or later, no
// privilege, no namespace; CMD's user and PIDs are unchanged), so every
// process CMD starts stays below it, even in the background, in a new
// session or double-forked. The supervisor sends SIGTERM, then SIGKILL after
// --grace, to every process below it when CMD exits and left some running
// (the lease is released after the last has ended), when the lease is lost,
// and when lease run dies, even by kill -9 (its pipe to the supervisor
// closes). Not covered: processes started outside the tree (systemd-run, at,
// ssh, a container runtime), and kill -9 of the supervisor itself (CMD then
// gets SIGKILL, what it started does not). Elsewhere CMD is started directly
// in its own process group: after a crash of lease run it keeps running, as
// do processes it leaves behind when it exits, and its fence is what
// protects the resource.
//
// # Exit codes
//
//	code     lease run                                   lease status     lease demo
//	0        CMD exited 0                                printed          every expectation held
//	N        CMD exited N (128+S if signal S killed it)
//	1                                                                     an expectation failed
//	         (lease break: the question was not answered yes)
//	64       usage: bad flag, bad or unknown store URL   same             same
//	69       the store could not be opened or reached    same             same
//	70       internal error (e.g. --metrics-addr in use)
//	75       the lease could not be acquired (--no-wait, --timeout, or the key's
//	         queue of waiters is full: the store URL's max_waiters, default 1024)
//	76       the lease was not held for the whole run, whatever CMD returned:
//	         lost while CMD ran (CMD got SIGTERM, then SIGKILL after --grace),
//	         or found gone by the release (expired, or taken by another holder)
//	126/127  CMD could not be executed / was not found
//	128+S    lease got signal S while still waiting for the lease
//
// # lease status
//
// Prints the holder, fence and remaining TTL of KEY, or "free". --json prints
// one object: {"key", "held", "holder", "fence", "remaining_ms", "store"};
// remaining_ms is 0 when the store cannot tell (etcd). Control characters
// and invalid UTF-8 in the key and holder are escaped ("\n", "\x1b"), here
// and in every message and error line of lease.
//
// # lease list, break, watch
//
// lease list prints a row per holder of every key starting with PREFIX that
// is held, has waiters or was just broken (Client.List): KEY, KIND, HOLDER,
// ID (a digest of the token), FENCE, REMAINING, WAITERS; --json prints one
// object per key as the store pages them. lease break KEY
// (Client.ForceRelease) asks on a terminal, needs --yes without one (else
// exit 64) and prints what it broke. lease watch prints the changes of the
// keys (Client.Watch) until SIGINT or SIGTERM, then exits 0. A store that
// cannot list or break is exit 69, as is an unreachable one; exit 64 for an
// invalid key or prefix.
//
// # Metrics and logs
//
// --metrics-addr ADDR serves Prometheus metrics at http://ADDR/metrics
// (package leaseprom: lease_acquired_total, lease_acquire_failed_total{reason},
// lease_lost_total{reason}, lease_released_total, lease_renewals_total,
// lease_renew_failures_total, lease_heartbeat_latency_seconds,
// lease_acquire_wait_seconds, lease_held, plus Go and process metrics);
// --metrics-key-label adds the key as a label. The same address serves the
// lease's debug page at http://ADDR/debug/leases (package leasedebug).
// Logs go to stderr through log/slog: --log-level debug|info|warn|error,
// --log-format text|json.
//
// # lease verify
//
// Runs the fault-injection harness (package verify) against a store, bounded
// in time and under its own key prefix, and cleans up: worker processes
// acquire, read and write a fenced register with their fence, while a
// nemesis kills (kill -9), stops (SIGSTOP past the TTL) and delays or cuts
// their connections; the history is checked for linearizability.
// --workload read-write makes every third worker a writer and the others
// readers (shared leases, fenced reads) on the one key; it needs a store
// that keeps shared holds (else exit 64). --workload transfer gives every
// worker two keys at once (AcquireAll) and two fenced registers, between
// which it moves amounts in one fenced write of both: their sum must never
// change. It prints the report (--json for one object) and exits 0 when
// clean, 1 on any violation (a stale read or write accepted, a sum changed,
// a lease stuck past its TTL), 64 on usage errors and 69 when the store or
// register cannot be reached. See docs/RELIABILITY.md.
//
// # lease demo
//
// Starts three worker processes (this binary, as the hidden "lease
// demo-worker") that compete for job:invoice-generation on a file store in a
// temporary directory (or --store): one holds it, two wait; the heartbeat
// keeps it past its TTL; the holder is killed with kill -9 and a waiter takes
// over after about a TTL with a larger fence; the new holder is frozen with
// SIGSTOP past its TTL, the third worker takes over, and the frozen one,
// resumed with SIGCONT, writes with its old fence to a fenced register (a
// file under flock) that rejects the write. It prints a timeline and a
// summary and exits 1 if any expectation failed. It takes about 9 s with the
// default --ttl 2s. The workers get the store URL in their environment,
// never on their command lines, where ps would show a password.
package main
