package main

import (
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestListenerPID finds this process by a port it listens on, and reads its
// CPU time, which grows while it works.
func TestListenerPID(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, addr := range []string{ln.Addr().String(), "http://" + ln.Addr().String()} {
		pid, err := listenerPID(addr)
		if err != nil || pid != os.Getpid() {
			t.Fatalf("listenerPID(%s) = %d, %v; want %d", addr, pid, err, os.Getpid())
		}
	}
	c0, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Busy until the 10 ms tick counter moves (bounded: a loaded machine
	// may give this thread little CPU).
	c1, x := c0, 0
	for end := time.Now().Add(30 * time.Second); c1 <= c0 && err == nil && time.Now().Before(end); {
		for range 1 << 20 {
			x++
		}
		c1, err = procCPU(os.Getpid())
	}
	if err != nil || c1 <= c0 {
		t.Fatalf("CPU time %v then %v (%v) after busy work (%d)", c0, c1, err, x)
	}
	if _, err := listenerPID("127.0.0.1:1"); err == nil {
		t.Error("listenerPID of a port nobody listens on: no error")
	}
}
