//go:build !race

package bench

const benchRace = false
