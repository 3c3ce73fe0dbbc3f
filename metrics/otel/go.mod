module github.com/zkrecipes/zkrecipes/metrics/otel

// This module requires the library at the release it is tagged with; in a
// checkout, go.work at the root builds against its directory instead.

go 1.24.0

require (
	github.com/zkrecipes/zkrecipes v0.1.0
	go.opentelemetry.io/otel v1.41.0
	go.opentelemetry.io/otel/metric v1.41.0
	go.opentelemetry.io/otel/sdk v1.41.0
	go.opentelemetry.io/otel/sdk/metric v1.41.0
	go.opentelemetry.io/otel/trace v1.41.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)
