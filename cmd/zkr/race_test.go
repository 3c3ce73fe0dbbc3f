//go:build race

package main

// raceEnabled builds the zkr under test with the race detector too.
const raceEnabled = true
