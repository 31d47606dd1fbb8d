// Package freeport finds a free TCP port on the loopback interface, for
// servers that must be told their port before they listen.
package freeport

import "net"

// Loopback returns a TCP port on 127.0.0.1 that was free a moment ago
// (another process may take it before the caller listens).
func Loopback() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
