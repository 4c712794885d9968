// Server CPU time from /proc: the process listening on a loopback port (etcd,
// ZooKeeper) or a PostgreSQL backend by its pid, read from /proc/<pid>/stat
// (utime + stime) before and after a measurement. Linux only; elsewhere the
// readings fail and the figure is left out.

package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on every
// Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// procCPU returns the CPU time (user + system) pid has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 { // fields 3.. ; utime and stime are fields 14 and 15
		return 0, errors.New("unexpected /proc stat format")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * clockTick, nil
}

// listenerPID returns the pid of the process listening on addr's TCP port
// on this machine (addr "host:port" or "scheme://host:port").
func listenerPID(addr string) (int, error) {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		addr = rest
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return 0, err
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			// sl local_address rem_address st ... inode (field 10)
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if !ok {
				continue
			}
			if n, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(n) == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
		fh.Close()
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("no listener on port %d", port)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if l, err := os.Readlink(fd); err == nil && inodes[l] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid, nil
		}
	}
	return 0, fmt.Errorf("listener on port %d: process not visible", port)
}

// processCPU is the CPU time (user + system) this process has used so far:
// the client's own cost, whatever the server does meanwhile.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settle waits, up to limit, until the machine is nearly idle (under a tenth
// of its CPU busy over half a second, by /proc/stat), so that the work a
// previous system left behind (a server expiring its leases or sessions, a
// collector) is not counted against the next one.
func settle(limit time.Duration) {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		busy0, total0, err := machineCPU()
		if err != nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
		busy1, total1, err := machineCPU()
		if err != nil || total1 <= total0 || 10*(busy1-busy0) < total1-total0 {
			return
		}
	}
}

// machineCPU returns the machine's busy and total CPU ticks so far (the
// "cpu" line of /proc/stat; idle and iowait are not busy).
func machineCPU() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}
