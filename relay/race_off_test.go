//go:build !race

package relay

// raceEnabled says the race detector is on; see client.
const raceEnabled = false
