//go:build !linux

// Process attributes of lease run's command outside Linux.

package main

import "syscall"

// childAttr puts the command in its own process group, so that signals reach
// its children too. There is no parent-death signal outside Linux: if lease
// run is killed with kill -9, the command keeps running after its lease
// expires (its fence still protects the resource).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
