//go:build !race

package gozk

const raceEnabled = false
