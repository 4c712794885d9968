// Options of the PostgreSQL store: table name, mode, namespace.

package pglease

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
)

// DefaultTable is the lease table's name when WithTable is not given.
const DefaultTable = "leasekit_leases"

// Mode selects how a Store holds leases; see the package documentation.
type Mode int

const (
	// ModeTable (the default) keeps each lease as a row whose expiry the
	// server's clock enforces. Every operation is one statement on any pooled
	// connection.
	ModeTable Mode = iota
	// ModeAdvisory holds each lease as a session-level advisory lock on a
	// connection taken out of the pool, shared by the store's leases of the
	// same TTL while any is held. The server frees the locks when the session
	// ends, and ends an idle session after the TTL (idle_session_timeout).
	ModeAdvisory
)

func (m Mode) String() string {
	switch m {
	case ModeTable:
		return "table"
	case ModeAdvisory:
		return "advisory"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

type config struct {
	table      string
	mode       Mode
	ns         string
	maxIdle    int
	maxWaiters int
}

// Option configures a Store.
type Option func(*config)

// WithTable sets the lease table (default [DefaultTable]): a name of at most
// 63 bytes, optionally schema-qualified as "schema.table". It is quoted as
// an identifier, so it is case-sensitive and may not contain a NUL byte.
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithMode selects table mode (the default) or advisory mode.
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithNamespace isolates the store's keys: stores with different namespaces
// share the table but never each other's keys. The default is "".
func WithNamespace(ns string) Option { return func(c *config) { c.ns = ns } }

// WithMaxIdleConns sets how many dedicated connections an advisory-mode
// store keeps for reuse once they hold no lease (default 4); more are
// closed. Table mode ignores it.
func WithMaxIdleConns(n int) Option { return func(c *config) { c.maxIdle = n } }

// WithMaxWaiters caps each key's queue of waiters at n (default
// [lease.DefaultMaxWaiters]): a queued Acquire of a token not yet queued,
// when the queue holds n live waiters, queues nothing and fails with a
// *[lease.QueueFullError]. The cap is exact: a queued attempt takes a
// transaction-level advisory lock of its key (pg_advisory_xact_lock, the
// one-bigint form, keyed by a hash of table, namespace and key) in the same
// round trip, before the statement that counts the queue. New
// refuses n outside 1..[lease.MaxMaxWaiters] with an error matching
// [lease.ErrInvalid].
func WithMaxWaiters(n int) Option { return func(c *config) { c.maxWaiters = n } }

// maxIdentLen is PostgreSQL's NAMEDATALEN-1: longer identifiers are truncated.
const maxIdentLen = 63

// parseTable splits and checks a table name.
func parseTable(name string) (pgx.Identifier, error) {
	if name == "" {
		return nil, lease.Invalid("table", "empty name")
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, lease.Invalid("table", "%q has more than one dot (use \"table\" or \"schema.table\")", name)
	}
	for _, p := range parts {
		switch {
		case p == "":
			return nil, lease.Invalid("table", "%q has an empty part", name)
		case len(p) > maxIdentLen:
			return nil, lease.Invalid("table", "%q: %q is %d bytes, longer than PostgreSQL's limit of %d", name, p, len(p), maxIdentLen)
		case strings.IndexByte(p, 0) >= 0:
			return nil, lease.Invalid("table", "%q contains a NUL byte", name)
		}
	}
	return pgx.Identifier(parts), nil
}
