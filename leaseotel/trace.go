// Spans: lease.acquire, lease.hold and lease.release, timed by the events.

package leaseotel

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/reason"
)

// hold identifies one lease among all the Clients an Observer sees. Two
// Clients' readers of one read epoch may share it: their spans are alike,
// so either may end first.
type hold struct {
	key, holder string
	fence, id   uint64
	shared      bool
}

// trace records e's spans. The acquire and release spans are children of
// the caller's span (e.Context); so is the hold span, which starts when
// the grant came back and ends when Release began or the loss was seen.
func (o *Observer) trace(ctx context.Context, e lease.Event) {
	switch e.Kind {
	case lease.EventAcquired:
		o.span(ctx, "lease.acquire", e, e.Time.Add(-e.Wait), e.Time, nil)
		_, s := o.tracer.Start(ctx, "lease.hold", trace.WithTimestamp(e.Time), trace.WithAttributes(attrs(e)...))
		o.mu.Lock()
		h := holdOf(e)
		o.holds[h] = append(o.holds[h], s)
		o.mu.Unlock()
	case lease.EventAcquireFailed:
		o.span(ctx, "lease.acquire", e, e.Time.Add(-e.Wait), e.Time, e.Err, attribute.String("lease.reason", reason.Failure(e.Err)))
	case lease.EventReleased:
		began := e.Time.Add(-e.Latency)
		if s := o.openHold(e, true); s != nil {
			s.End(trace.WithTimestamp(began))
		}
		o.span(ctx, "lease.release", e, began, e.Time, e.Err)
	case lease.EventLost:
		if s := o.openHold(e, true); s != nil {
			s.SetAttributes(attribute.String("lease.reason", string(e.Reason)))
			msg := fmt.Sprintf("lease lost (%s)", e.Reason)
			if e.Err != nil {
				msg += ": " + e.Err.Error()
			}
			s.SetStatus(codes.Error, msg)
			s.End(trace.WithTimestamp(e.Time))
		}
	case lease.EventRenewFailed:
		if s := o.openHold(e, false); s != nil {
			s.AddEvent("lease.renew_failed", trace.WithTimestamp(e.Time),
				trace.WithAttributes(attribute.String("lease.error", fmt.Sprint(e.Err))))
		}
	}
}

// span records a finished span of e's call from start to end, with err as
// its status.
func (o *Observer) span(ctx context.Context, name string, e lease.Event, start, end time.Time, err error, extra ...attribute.KeyValue) {
	_, s := o.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(append(attrs(e), extra...)...))
	if err != nil {
		s.SetStatus(codes.Error, err.Error())
	}
	s.End(trace.WithTimestamp(end))
}

// openHold returns the open hold span of e's lease, if any; end takes it
// out of the open ones.
func (o *Observer) openHold(e lease.Event, end bool) trace.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := holdOf(e)
	ss := o.holds[h]
	if len(ss) == 0 {
		return nil
	}
	if end && len(ss) == 1 {
		delete(o.holds, h)
	} else if end {
		o.holds[h] = ss[1:]
	}
	return ss[0]
}

func holdOf(e lease.Event) hold {
	return hold{key: e.Key, holder: e.Holder, fence: e.Fence, id: e.ID, shared: e.Shared}
}

// attrs are the span attributes of e's lease: never its token.
func attrs(e lease.Event) []attribute.KeyValue {
	kind := lease.KindExclusive
	switch {
	case e.Semaphore != "":
		kind = lease.KindSemaphore
	case e.Shared:
		kind = lease.KindShared
	}
	a := []attribute.KeyValue{
		attribute.String("lease.key", e.Key),
		attribute.String("lease.holder", e.Holder),
		attribute.String("lease.kind", string(kind)),
	}
	if e.Fence != 0 {
		a = append(a, attribute.Int64("lease.fence", int64(e.Fence)))
	}
	if e.Semaphore != "" {
		a = append(a, attribute.String("lease.semaphore", e.Semaphore))
	}
	return a
}
