package leaseotel_test

import (
	"context"
	"fmt"
	"log"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leaseotel"
	"github.com/leasekit/lease/memlease"
)

// A lease's spans join the trace of the request that took it. A service
// calls leaseotel.New() to use the global providers its OpenTelemetry
// setup installed; here the spans go to an in-memory recorder.
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs, err := leaseotel.New(leaseotel.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	store := memlease.New()
	defer store.Close()
	client, err := lease.New(store, lease.WithObserver(obs), lease.WithHolder("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, request := tp.Tracer("billing").Start(context.Background(), "run invoices")
	l, err := client.Acquire(ctx, "invoice-job")
	if err != nil {
		log.Fatal(err)
	}
	// ... the work, passing l.Fence() with its writes ...
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	request.End()

	names := map[string]string{}
	for _, s := range spans.Ended() {
		names[s.SpanContext().SpanID().String()] = s.Name()
	}
	for _, s := range spans.Ended() {
		if !s.Parent().IsValid() {
			continue // the request's own span
		}
		attrs := attribute.NewSet(s.Attributes()...)
		fmt.Printf("%-13s in %-14q %s\n", s.Name(), names[s.Parent().SpanID().String()], attrs.Encoded(attribute.DefaultEncoder()))
	}
	// Output:
	// lease.acquire in "run invoices" lease.fence=1,lease.holder=worker-1,lease.key=invoice-job,lease.kind=exclusive
	// lease.hold    in "run invoices" lease.fence=1,lease.holder=worker-1,lease.key=invoice-job,lease.kind=exclusive
	// lease.release in "run invoices" lease.fence=1,lease.holder=worker-1,lease.key=invoice-job,lease.kind=exclusive
}
