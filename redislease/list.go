// Listing keys and breaking leases (driver.Lister, driver.Breaker).

package redislease

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/redis/go-redis/v9"
)

var (
	_ driver.Lister  = (*Store)(nil)
	_ driver.Breaker = (*Store)(nil)

	//go:embed entry.lua
	entrySrc string
	//go:embed break.lua
	breakSrc string

	listScript  = redis.NewScript(readersSrc + entrySrc + "local _, now = clock()\nreturn entry(now)\n")
	breakScript = redis.NewScript(readersSrc + entrySrc + breakSrc)

	globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)
	unescaper   = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")
)

// List finds the keys starting with prefix by their fence counters (every
// key ever granted has one), with one SCAN of about limit on each master,
// and reads them with entry.lua in one pipeline.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	match := globEscaper.Replace(strings.TrimSuffix(s.leaseKey(prefix), "}")) + "*}:fence"
	names, next, err := s.scan(ctx, match, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("redislease: list %q: %w", prefix, err)
	}
	var keys []string
	for _, n := range names {
		if esc := strings.TrimSuffix(strings.TrimPrefix(n, s.prefix+"{"), "}:fence"); !strings.ContainsAny(esc, "{}") {
			keys = append(keys, unescaper.Replace(esc))
		}
	}
	cmds := s.pipelined(ctx, listScript, len(keys), func(pipe redis.Pipeliner, i int) *redis.Cmd {
		return listScript.EvalSha(ctx, pipe, s.keys(keys[i]))
	})
	var page []driver.Entry
	for i, c := range cmds {
		e, err := entryOf(keys[i], c.Val(), c.Err())
		if err != nil {
			return nil, "", fmt.Errorf("redislease: list %q: %w", prefix, err)
		}
		if len(e.Holders)+len(e.Waiters)+len(e.Broken) > 0 {
			page = append(page, e)
		}
	}
	return page, next, nil
}

// scan runs one SCAN on each master (of a Cluster; a single node is its own)
// that cursor names, or on all when cursor is "". The cursor maps each master
// not done, by address, to its SCAN cursor. Other clients cannot list: a
// Ring's shards cannot be scanned in a stable order.
func (s *Store) scan(ctx context.Context, match, cursor string, limit int) ([]string, string, error) {
	var forEach func(context.Context, func(context.Context, *redis.Client) error) error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		forEach = c.ForEachMaster
	case *redis.Client:
		forEach = func(ctx context.Context, fn func(context.Context, *redis.Client) error) error { return fn(ctx, c) }
	default:
		return nil, "", fmt.Errorf("a %T cannot list its keys: %w", c, errors.ErrUnsupported)
	}
	todo, err := url.ParseQuery(cursor)
	if err != nil {
		return nil, "", lease.Invalid("cursor", "%q", cursor)
	}
	var mu sync.Mutex
	var names []string
	next := url.Values{}
	err = forEach(ctx, func(ctx context.Context, n *redis.Client) error {
		addr := n.Options().Addr
		from, err := strconv.ParseUint(cmp.Or(todo.Get(addr), "0"), 10, 64)
		if cursor != "" && !todo.Has(addr) || err != nil {
			return err
		}
		found, to, err := n.Scan(ctx, from, match, int64(max(limit, 1))).Result()
		mu.Lock()
		defer mu.Unlock()
		names = append(names, found...)
		if to != 0 {
			next.Set(addr, strconv.FormatUint(to, 10))
		}
		return err
	})
	return names, next.Encode(), err
}

// Break runs break.lua: the tombstones of key are the sorted set
// P{esc(key)}:b of evicted tokens, scored by the expiry of their hold.
func (s *Store) Break(ctx context.Context, key string) (driver.Entry, error) {
	v, err := breakScript.Run(ctx, s.client, s.keys(key), s.channel(), key).Result()
	e, err := entryOf(key, v, err)
	if err != nil {
		return driver.Entry{}, fmt.Errorf("redislease: break %q: %w", key, err)
	}
	return e, nil
}

// entryOf reads entry.lua's reply v (see there) of key.
func entryOf(key string, v any, err error) (driver.Entry, error) {
	if err != nil {
		return driver.Entry{}, corrupt(err)
	}
	parts, _ := v.([]any)
	if len(parts) != 3 {
		return driver.Entry{}, fmt.Errorf("unexpected script reply %v", v)
	}
	hs, ok1 := parts[0].([]any)
	ws, ok2 := parts[1].([]any)
	bs, ok3 := parts[2].([]any)
	if !ok1 || !ok2 || !ok3 || len(hs)%5 != 0 || len(ws)%2 != 0 {
		return driver.Entry{}, fmt.Errorf("unexpected script reply %v", v)
	}
	e := driver.Entry{Key: key}
	for i := 0; i < len(hs); i += 5 {
		e.Holders = append(e.Holders, driver.Holder{Token: fmt.Sprint(hs[i]), Holder: fmt.Sprint(hs[i+1]),
			Fence: uint64(num(fmt.Sprint(hs[i+2]))), Remaining: millis(fmt.Sprint(hs[i+3])), Shared: hs[i+4] == int64(1)})
	}
	for i := 0; i < len(ws); i += 2 {
		tok, shared := strings.CutPrefix(fmt.Sprint(ws[i]), "\x00")
		e.Waiters = append(e.Waiters, driver.Waiter{Token: tok, Shared: shared, Remaining: millis(fmt.Sprint(ws[i+1]))})
	}
	for _, b := range bs {
		e.Broken = append(e.Broken, fmt.Sprint(b))
	}
	return e, nil
}
