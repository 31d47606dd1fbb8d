//go:build !race

package sim

// raceSlack widens wall-clock tolerances under the race detector (1 without it).
const raceSlack = 1
