// The process tree below lease run's supervisor, read from /proc, and
// signals to all of it.

package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// descendants returns the live processes below root: its children, their
// children, and so on (zombies, which have no children and cannot be
// signalled, are left out). It reads /proc/<pid>/stat of every process,
// which any user may, rather than /proc/<pid>/task/<tid>/children, which
// needs CONFIG_PROC_CHILDREN.
func descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]int{}
	zombie := map[int]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, ok := statOf(pid)
		if !ok {
			continue // gone meanwhile
		}
		kids[ppid] = append(kids[ppid], pid)
		zombie[pid] = state == 'Z'
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, k := range kids[p] {
			if !zombie[k] {
				out = append(out, k)
			}
			queue = append(queue, k)
		}
	}
	return out
}

// statOf returns the parent and state of pid from /proc/<pid>/stat:
// "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
func statOf(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return ppid, f[0][0], err == nil
}

// signalTree sends s to every live process below root and returns how many
// there were. A process forked meanwhile is found by the next call; as the
// supervisor is a subreaper, a process whose parent died is its child and
// still below it.
func signalTree(root int, s syscall.Signal) int {
	pids := descendants(root)
	for _, p := range pids {
		// A pid read from /proc could be reused by an unrelated process
		// only after its parent (one of ours) reaped it and the pid space
		// wrapped around, between the read and this call.
		_ = syscall.Kill(p, s)
	}
	return len(pids)
}
