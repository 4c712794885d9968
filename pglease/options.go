// Options, and the names derived from the table: queue table, index, channel.

package pglease

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// DefaultTable is the lease table's name when WithTable is not given.
const DefaultTable = "leasekit_leases"

// Mode selects which store New returns.
type Mode int

const (
	// ModeTable (the default): New returns a [TableStore].
	ModeTable Mode = iota
	// ModeAdvisory: New returns an [AdvisoryStore].
	ModeAdvisory
)

// String returns "table" or "advisory".
func (m Mode) String() string {
	if m == ModeTable || m == ModeAdvisory {
		return [...]string{"table", "advisory"}[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// config is a store's options and the names derived from them.
type config struct {
	mode                   Mode
	ns, name               string // name: the table as given
	table, queue, index    string // quoted
	indexName, channelName string // unquoted
	keysName               string // unquoted: the lease table's index for List
	classID                int32  // the namespace half of advisory lock keys
	maxWaiters, maxIdle    int
}

// Option configures a store.
type Option func(*config)

// WithTable sets the lease table (default [DefaultTable]): a name of at most
// 63 bytes, optionally schema-qualified as "schema.table". It is quoted as
// an identifier, so it is case-sensitive and may not contain a NUL byte.
func WithTable(name string) Option { return func(c *config) { c.name = name } }

// WithMode selects the store New returns (default ModeTable).
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithNamespace isolates the store's keys: stores with different namespaces
// share the table but never each other's keys. The default is "".
func WithNamespace(ns string) Option { return func(c *config) { c.ns = ns } }

// WithMaxIdleConns sets how many dedicated connections an AdvisoryStore
// keeps for reuse once they hold no lease (default 4). A TableStore ignores
// it.
func WithMaxIdleConns(n int) Option { return func(c *config) { c.maxIdle = n } }

// WithMaxWaiters caps each key's queue of waiters at n (default
// [driver.DefaultMaxWaiters]), exactly; constructors refuse n outside
// 1..[driver.MaxMaxWaiters].
func WithMaxWaiters(n int) Option { return func(c *config) { c.maxWaiters = n } }

func newConfig(opts []Option) (config, error) {
	c := config{name: DefaultTable, maxIdle: 4, maxWaiters: driver.DefaultMaxWaiters}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	ident := pgx.Identifier(strings.Split(c.name, "."))
	var err error
	switch {
	case len(ident) > 2:
		err = lease.Invalid("table", "%q has more than one dot (use \"table\" or \"schema.table\")", c.name)
	case slices.Contains(ident, ""):
		err = lease.Invalid("table", "%q has an empty part", c.name)
	case slices.ContainsFunc(ident, func(p string) bool { return len(p) > maxIdentLen }):
		err = lease.Invalid("table", "%q has a part longer than PostgreSQL's limit of %d bytes", c.name, maxIdentLen)
	case strings.IndexByte(c.name, 0) >= 0:
		err = lease.Invalid("table", "%q contains a NUL byte", c.name)
	case c.maxWaiters < 1 || c.maxWaiters > driver.MaxMaxWaiters:
		err = lease.Invalid("max waiters", "%d is outside 1..%d", c.maxWaiters, driver.MaxMaxWaiters)
	case c.mode != ModeTable && c.mode != ModeAdvisory:
		err = lease.Invalid("mode", "unknown mode %d", int(c.mode))
	}
	if err != nil {
		return config{}, fmt.Errorf("pglease: %w", err)
	}
	base := ident[len(ident)-1]
	queue := append(ident[:len(ident)-1:len(ident)-1], derivedName(base, "_queue"))
	c.indexName, c.keysName = derivedName(base, "_queue_expiry"), derivedName(base, "_keys")
	whole := strings.Join(ident, ".") + "\x00" + c.ns
	sum := sha256.Sum256([]byte(whole))
	c.table, c.queue, c.index = ident.Sanitize(), queue.Sanitize(), pgx.Identifier{c.indexName}.Sanitize()
	c.channelName, c.classID = "leasekit_"+hex.EncodeToString(sum[:12]), hash32(whole)
	return c, nil
}

// maxIdentLen is PostgreSQL's NAMEDATALEN-1: longer identifiers are truncated.
const maxIdentLen = 63

// derivedName is base+suffix, or, when that would pass PostgreSQL's
// identifier limit, base cut (at a character boundary) and followed by a
// hash of the whole base, then suffix.
func derivedName(base, suffix string) string {
	if len(base)+len(suffix) <= maxIdentLen {
		return base + suffix
	}
	tag := fmt.Sprintf("_%08x", uint32(hash32(base)))
	cut := maxIdentLen - len(suffix) - len(tag)
	for cut > 0 && !utf8.RuneStart(base[cut]) {
		cut--
	}
	return base[:cut] + tag + suffix
}

// hash32 is the 32-bit FNV-1a hash of s, as an int4 for pg_advisory_lock.
func hash32(s string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int32(h.Sum32())
}
