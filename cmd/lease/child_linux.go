// Process attributes of lease run's command on Linux.

package main

import "syscall"

// childAttr puts the command in its own process group, so that signals reach
// its children too, and asks the kernel to send it SIGTERM if lease run dies
// without being able to (kill -9): its lease expires after the TTL anyway,
// and a command left running would then work without a lease.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
