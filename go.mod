module github.com/zkrecipes/zkrecipes

go 1.24.0

require (
	github.com/google/uuid v1.6.0
	go.uber.org/goleak v1.3.0
)
