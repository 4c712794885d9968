// Package leaseurl opens a [lease.Store] from a URL, so that programs and the
// lease command can pick a backend by configuration:
//
//	store, err := leaseurl.Open(ctx, os.Getenv("LEASE_STORE"))
//	if err != nil { ... }        // the error never contains the password
//	defer store.Close()          // also closes the backend client Open made
//	client, err := lease.New(store)
//
// Schemes (one file each in this package; see [Schemes]):
//
//	file:///var/lib/leases       filelease, a host-local directory ([DefaultFileDir] when empty)
//	mem://name                   memlease, shared by the Opens of one process with the same name
//	redis://[user:pass@]host:port[/db][?prefix=myapp:]
//	rediss://...                 Redis over TLS
//	postgres://user:pass@host/db[?mode=advisory&table=t&namespace=ns&migrate=false]
//	etcd://[user:pass@]host:port,host:port[/prefix/]   (etcds:// for TLS)
//	zk://host:port,host:port[/chroot]
//
// The options after '?' that belong to leasekit (prefix, mode, table,
// namespace, migrate) are removed before the rest of the URL is handed to the
// backend's own parser, so backend options (redis dial_timeout, postgres
// sslmode, ...) keep working.
//
// Passwords are never printed: errors returned by Open are redacted, and
// [Redact] turns a URL into a form that is safe to log.
package leaseurl
