module github.com/zkrecipes/zkrecipes/zkgrpc

// This module requires the library at the release it is tagged with; in a
// checkout, go.work at the root builds against its directory instead. It is
// a module of its own so that the library does not depend on gRPC. gRPC
// v1.81.1 is the oldest release the proxy serves here (it needs Go 1.25).

go 1.25.0

require (
	github.com/zkrecipes/zkrecipes v0.1.0
	google.golang.org/grpc v1.81.1
)

require (
	github.com/google/uuid v1.6.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

