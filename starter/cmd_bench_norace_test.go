//go:build !race

package main

const benchRace = false
