// Package testnet holds network helpers for tests.
package testnet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/freeport"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.Loopback()
	require.NoError(t, err)
	return port
}
