// Package reason names why an acquisition failed, as the metrics packages
// (leaseprom, leaseotel) label it.
package reason

import (
	"context"
	"errors"

	"github.com/leasekit/lease"
)

// Failures are every value Failure returns.
var Failures = []string{"held", "timeout", "canceled", "closed", "queue_full", "error"}

// Failure is the reason of a failed acquisition's error. An Acquire that
// gave up matches both ErrHeld and ctx's error: ctx's wins.
func Failure(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, lease.ErrHeld):
		return "held"
	case errors.Is(err, lease.ErrClosed):
		return "closed"
	case errors.Is(err, lease.ErrQueueFull):
		return "queue_full"
	}
	return "error"
}
