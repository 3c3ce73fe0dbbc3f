package main

import (
	"context"
	"os"
)

func main() {
	a := &app{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
	}
	os.Exit(a.run(context.Background(), os.Args[1:]))
}
