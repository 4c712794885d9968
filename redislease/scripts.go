// The Lua scripts behind each operation, embedded from the .lua files.

package redislease

import (
	_ "embed"
	"errors"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed inspect.lua
	inspectSrc string

	acquireScript = redis.NewScript(acquireSrc)
	renewScript   = redis.NewScript(renewSrc)
	releaseScript = redis.NewScript(releaseSrc)
	inspectScript = redis.NewScript(inspectSrc)
)

// isNoScript reports whether err says the server lacks a cached script.
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
