package otel_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zkrecipes/zkrecipes"
	zkotel "github.com/zkrecipes/zkrecipes/metrics/otel"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// A session whose metrics and spans go to OpenTelemetry. A program gives
// the providers it exports with (OTLP, Prometheus); here a span recorder
// and a manual reader show what the adapter makes, and an embedded server
// stands in for the ensemble.
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())

	tel, err := zkotel.New(mp, tp, zkotel.Options{})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := zkserver.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, []string{srv.Addr()}, tel.SessionOptions()...)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// The caller's span: the lock's wait and hold are its children.
	ctx, job := tp.Tracer("example").Start(ctx, "nightly-report")
	m := zkrecipes.NewMutex(s, "/example/otel/nightly-report")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// ... the work, passing m.Token() on ...
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	job.End()

	for _, sp := range spans.Ended() {
		fmt.Printf("%s (child of the job: %v)\n", sp.Name(), sp.Parent().SpanID() == job.SpanContext().SpanID())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if h, ok := mt.Data.(metricdata.Histogram[float64]); ok && mt.Name == "zkrecipes.wait.duration" {
				fmt.Printf("%s: %d grant(s) of %s\n", mt.Name, h.DataPoints[0].Count, sm.Scope.Name)
			}
		}
	}
	// Output:
	// zkrecipes.mutex.wait (child of the job: true)
	// zkrecipes.mutex.hold (child of the job: true)
	// nightly-report (child of the job: false)
	// zkrecipes.wait.duration: 1 grant(s) of github.com/zkrecipes/zkrecipes/metrics/otel
}
