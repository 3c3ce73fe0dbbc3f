module github.com/zkrecipes/zkrecipes

go 1.24.0

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/google/uuid v1.6.0
	github.com/jcmturner/gokrb5/v8 v8.4.4
	go.uber.org/goleak v1.3.0
)

require (
	github.com/jcmturner/aescts/v2 v2.0.0 // indirect
	github.com/jcmturner/gofork v1.7.6 // indirect
	github.com/stretchr/testify v1.9.0 // indirect
	golang.org/x/crypto v0.48.0 // indirect
)
