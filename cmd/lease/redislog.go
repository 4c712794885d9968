// go-redis's own log lines, routed to the command's logger at debug level.

package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// redisLog passes go-redis's log lines to an slog logger at debug level.
// go-redis prints its connection pool's retries to stderr itself (four lines
// before the real error when Redis is down); the error lease reports already
// says what failed.
type redisLog struct {
	log   *slog.Logger
	scrub func(string) string
}

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	if r.log.Enabled(ctx, slog.LevelDebug) {
		r.log.DebugContext(ctx, r.scrub(fmt.Sprintf(format, v...)), "component", "go-redis")
	}
}

// routeRedisLog sends go-redis's log, a process-wide setting, to log;
// scrub removes the store's password from each line.
func routeRedisLog(log *slog.Logger, scrub func(string) string) {
	redis.SetLogger(redisLog{log: log, scrub: scrub})
}
