module github.com/zkrecipes/zkrecipes/internal/gozk

// This module is never released: it requires the library at the version
// that go.work, at the root of the checkout, replaces with its directory.

go 1.24.0

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/zkrecipes/zkrecipes v0.1.0
)

require github.com/google/uuid v1.6.0 // indirect
