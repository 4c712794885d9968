// Package leaseurl opens a store (a [github.com/leasekit/lease/driver.Store])
// from a URL, so that programs and the
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
//	redis+cluster://[user:pass@]host:port,host:port[?prefix=myapp:]   Redis Cluster (rediss+cluster:// for TLS)
//	redis+sentinel://[user:pass@]host:port,host:port/mastername[/db][?prefix=..&sentinel_password=..]
//	                             Redis behind Sentinel (rediss+sentinel:// for TLS); the userinfo is the
//	                             Redis servers' credentials, sentinel_username/sentinel_password the sentinels'
//	postgres://user:pass@host/db[?sslmode=..&mode=advisory&table=t&namespace=ns&migrate=false]
//	                             sslmode defaults to verify-full for a host that is not loopback (below)
//	mysql://user:pass@host[:3306]/db[?mode=getlock&table=t&namespace=ns&migrate=false&tls=..]
//	                             MariaDB/MySQL (mysqllease); other parameters are go-sql-driver's,
//	                             tls defaults to true (verified) for a host that is not loopback
//	etcd://[user:pass@]host:port,host:port[/prefix/]   (etcds:// for TLS)
//	nats://[user:pass@]host:port,host:port[/bucket][?token=T&namespace=ns]
//	                             NATS JetStream KV (natss:// for TLS); the bucket is created if missing
//	zk://[user:pass@]host:port,host:port[/root][?session_timeout=10s]
//	                             ZooKeeper; with user:pass the store logs in (digest) and creates its
//	                             nodes for that identity only (creator ACL), refusing a root open to
//	                             anyone (zklease.ErrOpenRoot); without, its nodes are open to anyone
//
// Every Redis scheme also takes replica_ack=N and replica_ack_timeout=D
// (default [DefaultReplicaAckTimeout]): redislease.WithReplicaAck, a WAIT for
// N replicas after every write.
//
// Every scheme takes max_waiters=N: the cap of each key's queue of waiters
// (the store's WithMaxWaiters, default driver.DefaultMaxWaiters; 1 to
// driver.MaxMaxWaiters, and at most filelease.MaxWaiters for file URLs).
// A waiter beyond it gets an error matching [lease.ErrQueueFull] at once.
//
// The options after '?' that belong to leasekit (prefix, mode, table,
// namespace, migrate, session_timeout, replica_ack, replica_ack_timeout,
// max_waiters) are removed before the rest of the URL is handed to the
// backend's own parser, so backend options (redis dial_timeout, postgres
// sslmode, ...) keep working.
//
// TLS: a postgres:// or postgresql:// URL without sslmode whose host is
// not loopback (anything but localhost, 127.0.0.0/8, ::1 and unix sockets,
// as written) is opened with sslmode=verify-full ([DefaultPostgresSSLMode]):
// the server's certificate must chain to sslrootcert (else the system's
// roots) and name the host. Loopback hosts and unix sockets keep pgx's
// default, prefer, which does not verify the certificate. An sslmode in the
// URL (or ssl=true), in $PGSSLMODE, or from a service file is used as
// given. A mysql:// URL without tls whose host is not loopback gets
// tls=true ([DefaultMySQLTLS]: verified against the system's roots); set
// tls=skip-verify, preferred, false or a name registered with
// mysql.RegisterTLSConfig yourself. rediss://, etcds:// and natss:// verify the server's certificate; Redis's
// skip_verify=true is the explicit opt-out and disables that verification.
//
// Passwords are never printed: errors returned by Open are redacted, and
// [Redact] turns a URL into a form that is safe to log.
package leaseurl
