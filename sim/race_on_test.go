//go:build race

package sim

// raceSlack widens wall-clock tolerances: the race detector makes request
// parsing and the client many times slower.
const raceSlack = 5
