module github.com/zkrecipes/zkrecipes/zkclient/kerberos

// This module requires the zkrecipes modules at the release it is tagged
// with (v0.1.0: tags v0.1.0, zkclient/kerberos/v0.1.0 and cmd/zkr/v0.1.0 on
// one commit), so that go install ...@version needs no replace directive; in
// a checkout, go.work at the root builds against their directories instead.

go 1.24.0

require (
	github.com/jcmturner/gofork v1.7.6
	github.com/jcmturner/gokrb5/v8 v8.4.4
	github.com/zkrecipes/zkrecipes v0.1.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/hashicorp/go-uuid v1.0.3 // indirect
	github.com/jcmturner/aescts/v2 v2.0.0 // indirect
	github.com/jcmturner/dnsutils/v2 v2.0.0 // indirect
	github.com/jcmturner/goidentity/v6 v6.0.1 // indirect
	github.com/jcmturner/rpc/v2 v2.0.3 // indirect
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/net v0.50.0 // indirect
)
