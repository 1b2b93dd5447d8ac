//go:build !race

package operator_test

// raceOn says the race detector is on: large tests shrink, since it slows them tenfold.
const raceOn = false
