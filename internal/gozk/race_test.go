//go:build race

package gozk

// raceEnabled: the race detector's shadow memory would be counted as the
// clients'.
const raceEnabled = true
