// Open, the scheme table and the store wrapper that owns the backend client.

package leaseurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// ErrUnsupported matches the error Open returns for a scheme it does not know
// or that is not wired yet.
var ErrUnsupported = errors.New("leaseurl: unsupported store URL scheme")

// Opener makes a store from a parsed URL. The returned closer, if not nil,
// is called after the store's own Close, to close the backend client the
// opener created. Options are those given to Open.
type Opener func(ctx context.Context, u *url.URL, o *Options) (driver.Store, func() error, error)

var (
	mu      sync.RWMutex
	openers = map[string]Opener{}
)

// Register makes scheme available to Open. It panics if scheme is already
// registered. Schemes are lower case, without "://".
func Register(scheme string, o Opener) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("leaseurl: scheme registered twice: " + scheme)
	}
	openers[scheme] = o
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Options tune Open.
type Options struct {
	// Query holds the leasekit options of the URL (prefix, mode, ...), removed
	// from the URL before an opener sees it. An opener takes what it knows with
	// Take; Open fails if any are left over.
	Query url.Values
	// defaults are the options given with WithDefault.
	defaults url.Values
}

// Take returns and removes the leasekit option name from the URL's query,
// or returns its default (WithDefault) when the URL does not set it.
func (o *Options) Take(name string) (string, bool) {
	vs, ok := o.Query[name]
	if !ok {
		if o.defaults.Has(name) {
			return o.defaults.Get(name), true
		}
		return "", false
	}
	delete(o.Query, name)
	if len(vs) == 0 {
		return "", true
	}
	return vs[len(vs)-1], true
}

// Option configures Open.
type Option func(*openConfig)

type openConfig struct {
	defaults url.Values
}

// WithDefault sets the leasekit option name (prefix, mode, table, namespace,
// migrate) to value when the URL does not set it, e.g. a per-application
// prefix: WithDefault("prefix", "myapp:").
func WithDefault(name, value string) Option {
	return func(c *openConfig) {
		if c.defaults == nil {
			c.defaults = url.Values{}
		}
		c.defaults.Set(name, value)
	}
}

// Open returns the store rawURL names. The store's Close also closes the
// backend client (Redis client, PostgreSQL pool, ...) Open created. Errors
// never contain the URL's password.
func Open(ctx context.Context, rawURL string, opts ...Option) (driver.Store, error) {
	var cfg openConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	s, err := open(ctx, rawURL, cfg)
	if err != nil {
		return nil, scrub(err, rawURL)
	}
	return s, nil
}

func open(ctx context.Context, rawURL string, cfg openConfig) (driver.Store, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, fmt.Errorf("leaseurl: %w", lease.Invalid("store", "empty URL"))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("leaseurl: %w", lease.Invalid("store", "malformed URL %q: %v", Redact(rawURL), unwrapURLError(err)))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("leaseurl: %w", lease.Invalid("store", "the store URL has no scheme (want one of %s)", strings.Join(Schemes(), ", ")))
	}
	scheme := strings.ToLower(u.Scheme)
	mu.RLock()
	op, ok := openers[scheme]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q in %q (want one of %s)", ErrUnsupported, scheme, Redact(rawURL), strings.Join(Schemes(), ", "))
	}
	// The leasekit options are taken out of the URL; the rest is the backend's.
	q := u.Query()
	o := &Options{Query: url.Values{}, defaults: cfg.defaults}
	for _, k := range leasekitParams {
		if vs, ok := q[k]; ok {
			o.Query[k] = vs
			q.Del(k)
		}
	}
	if len(o.Query) > 0 {
		u.RawQuery = q.Encode()
	}
	store, closer, err := op(ctx, u, o)
	if err != nil {
		return nil, fmt.Errorf("leaseurl: open %s store %q: %w", scheme, Redact(rawURL), err)
	}
	if len(o.Query) > 0 {
		left := make([]string, 0, len(o.Query))
		for k := range o.Query {
			left = append(left, k)
		}
		sort.Strings(left)
		closeBoth(store, closer)
		return nil, fmt.Errorf("leaseurl: %w", lease.Invalid("store", "option(s) %s do not apply to %s URLs", strings.Join(left, ", "), scheme))
	}
	if closer == nil {
		return store, nil
	}
	return wrap(store, closer), nil
}

// leasekitParams are the query parameters that belong to leasekit, not to
// the backend's URL parser.
var leasekitParams = []string{"prefix", "mode", "table", "namespace", "migrate", "session_timeout", "replica_ack", "replica_ack_timeout", "max_waiters"}

// maxWaiters takes the max_waiters option, every scheme's: the cap of each
// key's queue of waiters (the store's WithMaxWaiters). ok is false when the
// URL does not set it; a value that is not an integer in
// 1..driver.MaxMaxWaiters is an error matching lease.ErrInvalid.
func (o *Options) maxWaiters() (n int, ok bool, err error) {
	v, ok := o.Take("max_waiters")
	if !ok {
		return 0, false, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil {
		return 0, false, lease.Invalid("max_waiters", "%q is not an integer", v)
	}
	if n < 1 || n > driver.MaxMaxWaiters {
		return 0, false, lease.Invalid("max_waiters", "%d is not between 1 and %d", n, driver.MaxMaxWaiters)
	}
	return n, true, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// parseBool reads a leasekit boolean option.
func parseBool(name, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on", "":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, lease.Invalid(name, "%q is not a boolean", v)
}
