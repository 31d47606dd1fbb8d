//go:build race

package main

// raceOn: the race detector slows the client several-fold, so tests skip
// assertions that need the client to keep up with 768 streams.
const raceOn = true
