// Options, the store's identifiers (table, lock names) and New.

package mysqllease

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/leasekit/lease"
)

// Mode selects how a store holds its leases.
type Mode int

const (
	// ModeTable keeps each lease as a row whose expiry the server's clock
	// judges (the default).
	ModeTable Mode = iota
	// ModeGetLock holds each lease as a GET_LOCK named after the key on a
	// connection of its own, with the fence in the key's row.
	ModeGetLock
)

// DefaultTable is the lease table's default name.
const DefaultTable = "leasekit_leases"

// maxIdentLen is MySQL's and MariaDB's limit of a table or database name.
const maxIdentLen = 64

// maxNamespaceLen is the width of the ns column.
const maxNamespaceLen = 255

// Option configures New.
type Option func(*config)

type config struct {
	ns, name string
	mode     Mode
}

// WithNamespace isolates the store's keys from other namespaces in the same
// table (default "", at most 255 bytes).
func WithNamespace(ns string) Option { return func(c *config) { c.ns = ns } }

// WithTable sets the lease table: "table" or "database.table" (default
// DefaultTable). Each part is quoted as an identifier.
func WithTable(name string) Option { return func(c *config) { c.name = name } }

// WithMode selects ModeTable (default) or ModeGetLock.
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// New returns a store over db in the mode WithMode selects. It does not
// touch the database: call Migrate once.
func New(db *sql.DB, opts ...Option) (Store, error) {
	c := config{name: DefaultTable}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	table, err := quoteTable(c.name)
	switch {
	case err != nil:
	case db == nil:
		err = lease.Invalid("store", "nil *sql.DB")
	case len(c.ns) > maxNamespaceLen:
		err = lease.Invalid("namespace", "longer than %d bytes", maxNamespaceLen)
	case c.mode != ModeTable && c.mode != ModeGetLock:
		err = lease.Invalid("mode", "unknown mode %d", int(c.mode))
	}
	if err != nil {
		return nil, fmt.Errorf("mysqllease: %w", err)
	}
	b := newBase(db, c, table)
	if c.mode == ModeGetLock {
		return newGetLock(b), nil
	}
	return &TableStore{base: b}, nil
}

// quoteTable quotes "table" or "database.table" with backquotes, refusing
// empty, over-long or NUL-carrying parts (a backquote is doubled).
func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", lease.Invalid("table", "%q has more than one dot (use \"table\" or \"database.table\")", name)
	}
	for i, p := range parts {
		if p == "" || strings.TrimRight(p, " ") != p || len([]rune(p)) > maxIdentLen || strings.IndexByte(p, 0) >= 0 {
			return "", lease.Invalid("table", "%q: each part must have 1 to %d characters, no NUL byte and no trailing space", name, maxIdentLen)
		}
		parts[i] = "`" + strings.ReplaceAll(p, "`", "``") + "`"
	}
	return strings.Join(parts, "."), nil
}

// lockName is the GET_LOCK name of key: "leasekit_" and 48 hex digits of
// SHA-256(prefix, key), within MySQL's limit of 64 characters; the prefix
// (the table and the namespace, see newBase) keeps the locks of other
// tables and namespaces apart. lockNameSQL
// is the same name computed by the server from the row's key c.k.
func lockName(prefix, key string) string {
	sum := sha256.Sum256([]byte(prefix + key))
	return "leasekit_" + hex.EncodeToString(sum[:24])
}

func lockNameSQL(prefix string) string {
	return "CONCAT('leasekit_', LEFT(SHA2(CONCAT(X'" + hex.EncodeToString([]byte(prefix)) + "', c.k), 256), 48))"
}
