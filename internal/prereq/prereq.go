// Package prereq decides what a test does when something it needs from the
// machine is missing (Docker, git, Slurm, a browser, a built binary): it
// skips with one line that names what is missing, except under CI, where
// the machine is set up with all of it, so a missing prerequisite is a
// defect and fails the test. Reference data is no prerequisite:
// internal/reftest skips for it everywhere, visibly.
package prereq

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// CI reports whether the tests run under CI: CI set to anything but "",
// "false" or "0" (CI systems set CI=true).
func CI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v != "" && v != "false" && v != "0"
}

// Missing skips t with msg, or fails it under CI.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if CI() {
		t.Fatalf("%s (CI=%s: a missing prerequisite fails)", msg, os.Getenv("CI"))
		return
	}
	t.Skip(msg)
}

// Missingf is Missing with a format.
func Missingf(t testing.TB, format string, args ...any) {
	t.Helper()
	Missing(t, fmt.Sprintf(format, args...))
}
