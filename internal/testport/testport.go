// Package testport hands tests loopback TCP ports that were free a moment
// ago, never the same port twice in one process, so that tests running in
// parallel cannot be given the same port for their private servers.
package testport

import (
	"net"
	"sync"
	"testing"
)

var (
	mu     sync.Mutex
	handed = make(map[int]bool)
)

// Free returns n distinct ports on 127.0.0.1 that nothing listened on a
// moment ago and that no earlier call in this process returned.
func Free(t testing.TB, n int) []int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testport: listen: %v", err)
		}
		ls = append(ls, l) // held until all n are chosen: the kernel cannot hand one out twice
		p := l.Addr().(*net.TCPAddr).Port
		if !handed[p] {
			handed[p] = true
			ports = append(ports, p)
		}
	}
	return ports
}

// One returns a single port, as Free(t, 1).
func One(t testing.TB) int {
	t.Helper()
	return Free(t, 1)[0]
}
