//go:build !race

package zktest

const raceEnabled = false
