// The Lua scripts behind each operation, embedded from the .lua files.

package redislease

import (
	_ "embed"
	"errors"
	"strings"

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
	//go:embed grant.lua
	grantSrc string

	acquireScript = redis.NewScript(withGrant(acquireSrc))
	renewScript   = redis.NewScript(renewSrc)
	releaseScript = redis.NewScript(withGrant(releaseSrc))
	inspectScript = redis.NewScript(inspectSrc)
)

// grantMarker is the line of acquire.lua and release.lua where grant.lua
// goes.
const grantMarker = "--@grant\n"

// withGrant returns src with grant.lua in place of its one grantMarker: the
// grant of a free key is written once for both scripts, and inline (a Lua
// function shared by both would be a closure made on every call).
func withGrant(src string) string {
	if strings.Count(src, grantMarker) != 1 {
		panic("redislease: a script must have exactly one " + strings.TrimSpace(grantMarker) + " line")
	}
	return strings.Replace(src, grantMarker, grantSrc, 1)
}

// isNoScript reports whether err says the server lacks a cached script.
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
