// Cleaning up after a run: the run's key leaves state behind in stores that
// keep fences forever (a Redis fence counter, a PostgreSQL row, a lease
// file, a Lease object) and ZooKeeper's tombstones of forced releases; etcd keeps nothing
// once the last lease is gone.

package verify

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/k8slease"
	"github.com/leasekit/lease/leaseurl"
	"github.com/leasekit/lease/pglease"
	"github.com/leasekit/lease/redislease"
	"github.com/leasekit/lease/zklease"
)

// withoutLeasekitParams returns raw without the query options leaseurl
// takes for itself, for the backend's own URL parser.
func withoutLeasekitParams(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	q := u.Query()
	for _, k := range []string{"prefix", "mode", "table", "namespace", "migrate", "session_timeout"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// cleanup deletes what the run's key left in the store.
func cleanup(ctx context.Context, storeURL, prefix, key string) error {
	s, err := leaseurl.Open(ctx, storeURL, leaseurl.WithDefault("prefix", prefix), leaseurl.WithDefault("namespace", prefix))
	if err != nil {
		return err
	}
	defer s.Close()
	switch b := leaseurl.Unwrap(s).(type) {
	case *filelease.Store:
		if err := os.Remove(b.File(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	case *redislease.Store:
		// The store's own client: a single node, a Sentinel failover client
		// (the current primary) or, on a Cluster, the master of the key's slot.
		var c redis.Cmdable = b.Client()
		if cc, ok := b.Client().(*redis.ClusterClient); ok {
			node, err := cc.MasterForKey(ctx, b.Prefix()+"{"+key+"}")
			if err != nil {
				return err
			}
			c = node
		}
		// The key is [a-z0-9-] only: no escaping inside the hash tag.
		pattern := globEscape(b.Prefix()) + "{" + key + "}*"
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for _, k := range keys {
			if err := c.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
	case pglease.Store:
		raw, err := withoutLeasekitParams(storeURL)
		if err != nil {
			return err
		}
		pool, err := newPool(ctx, raw)
		if err != nil {
			return err
		}
		defer pool.Close()
		for _, t := range []string{b.Table(), b.QueueTable()} {
			if t == "" {
				continue
			}
			if _, err := pool.Exec(ctx, "DELETE FROM "+t+" WHERE ns = $1 AND key = $2", b.Namespace(), key); err != nil {
				return fmt.Errorf("delete from %s: %w", t, err)
			}
		}
	case *zklease.Store:
		// Persistent tombstones outlive the run's forced releases; the key
		// is [a-z0-9-] only, its node name unescaped.
		parent := b.Root() + "/" + key
		children, _, err := b.Conn().Children(parent)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		} else if err != nil {
			return err
		}
		for _, c := range children {
			if err := b.Conn().Delete(parent+"/"+c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
		if err := b.Conn().Delete(parent, -1); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNotEmpty) {
			return err
		}
	case *k8slease.Store:
		return b.Delete(ctx, key)
	}
	return nil
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)
	return r.Replace(s)
}
