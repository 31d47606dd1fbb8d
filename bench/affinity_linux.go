package bench

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// cpuMask is a sched_setaffinity mask for up to 1024 CPUs.
type cpuMask [16]uint64

func maskOf(cpus []int) cpuMask {
	var m cpuMask
	for _, c := range cpus {
		if c >= 0 && c < len(m)*64 {
			m[c/64] |= 1 << (c % 64)
		}
	}
	return m
}

func setAffinity(tid int, m *cpuMask) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(*m), uintptr(unsafe.Pointer(m)))
	if e != 0 {
		return e
	}
	return nil
}

func getAffinity(tid int) (cpuMask, error) {
	var m cpuMask
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, uintptr(tid), unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return m, e
	}
	return m, nil
}

// pinProcess restricts every thread of this process to cpus (threads the
// runtime starts later inherit it from their creators) and returns a
// function that restores the previous mask.
func pinProcess(cpus []int) (restore func(), ok bool) {
	prev, err := getAffinity(0)
	if err != nil {
		return func() {}, false
	}
	m := maskOf(cpus)
	if !setAllThreads(&m) {
		setAllThreads(&prev)
		return func() {}, false
	}
	return func() { setAllThreads(&prev) }, true
}

func setAllThreads(m *cpuMask) bool {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false
	}
	ok := true
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			if setAffinity(tid, m) != nil {
				ok = false
			}
		}
	}
	return ok
}

// startPinned starts cmd with its CPU affinity limited to cpus: the child
// inherits the affinity of the thread that forks it, so that thread is
// switched to cpus for the fork and switched back afterwards.
func startPinned(start func() error, cpus []int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := getAffinity(0)
	if err != nil {
		return start()
	}
	m := maskOf(cpus)
	_ = setAffinity(0, &m)
	err = start()
	_ = setAffinity(0, &prev)
	return err
}
