//go:build !linux

package bench

// CPU pinning is only implemented on Linux; elsewhere capacity points run
// unpinned.
func pinProcess(cpus []int) (restore func(), ok bool) { return func() {}, false }

func startPinned(start func() error, cpus []int) error { return start() }
