// Package redisfence makes a write to a Redis string key conditional on a
// lease's fence. The largest fence the key accepted is kept beside it, at
// FenceKey(key) in the same Cluster hash slot, and never expires; Set
// checks and writes both in one Lua script:
//
//	err := redisfence.Set(ctx, rdb, "report:daily", l.Fence(), body)
//	// errors.Is(err, lease.ErrStaleFence): a newer holder has written.
//
// Readers GET the key as usual. Set replaces the key's value and TTL as SET
// does. Why this is atomic: docs/design.md, "Fenced writes".
package redisfence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
)

//go:embed set.lua
var setLua string

var setScript = redis.NewScript(setLua)

// Set writes value to key and fence to FenceKey(key), unless the fence
// stored there is larger: then it writes nothing and returns a
// *lease.StaleFenceError (matching lease.ErrStaleFence). c is any go-redis
// client: a single node, a Cluster or a Ring.
func Set(ctx context.Context, c redis.Scripter, key string, fence uint64, value any) error {
	fk, err := FenceKey(key)
	if err != nil {
		return err
	}
	s, err := setScript.Run(ctx, c, []string{key, fk}, strconv.FormatUint(fence, 10), value).Text()
	switch {
	case err != nil:
		return fmt.Errorf("redisfence: set %q: %w", key, err)
	case s == "":
		return nil
	}
	stored, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("redisfence: set %q: fence key %q holds %q", key, fk, s)
	}
	return fmt.Errorf("redisfence: %w", &lease.StaleFenceError{Resource: "redis key " + strconv.Quote(key), Fence: fence, Stored: stored})
}

// FenceKey returns the key that keeps key's fence, in key's hash slot:
// key+":fence" when key has a hash tag, else "{key}:fence". A key with
// braces but no hash tag has no such name: FenceKey refuses it.
func FenceKey(key string) (string, error) {
	fk := key + ":fence"
	if hashed(key) == key {
		fk = "{" + key + "}:fence"
	}
	if key == "" || hashed(fk) != hashed(key) {
		return "", fmt.Errorf("redisfence: %w", lease.Invalid("key", "%q: braces without a hash tag, or empty", key))
	}
	return fk, nil
}

// hashed returns the part of k that Redis Cluster hashes: its hash tag (the
// text between the first '{' and the next '}', if not empty), or all of k.
func hashed(k string) string {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			return k[i+1 : i+1+j]
		}
	}
	return k
}
