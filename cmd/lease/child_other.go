//go:build !linux

// The command of lease run outside Linux: started directly, in its own
// process group. There is no subreaper and no parent-death signal: processes
// the command leaves running outlive it, and if lease run is killed with
// kill -9 the command keeps running after its lease expires (its fence still
// protects the resource).

package main

import (
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// directChild is the command started by lease run itself.
type directChild struct {
	cmd   *exec.Cmd
	grace time.Duration
	ended chan struct{}
	ws    syscall.WaitStatus
	once  sync.Once
}

func startChild(argv, env []string, grace time.Duration) (child, int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // signals reach its children too
	if err := cmd.Start(); err != nil {
		return nil, startError(err), err
	}
	c := &directChild{cmd: cmd, grace: grace, ended: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			c.ws = ws
		}
		close(c.ended)
	}()
	return c, exitOK, nil
}

func (c *directChild) pid() int                { return c.cmd.Process.Pid }
func (c *directChild) exited() <-chan struct{} { return c.ended }
func (c *directChild) left() int               { return 0 }
func (c *directChild) done() <-chan struct{}   { return c.ended }
func (c *directChild) code() int               { return exitCode(c.ws) }
func (c *directChild) signal(s syscall.Signal) { signalGroup(c.pid(), s) }

// stop sends SIGTERM to the command's group, and SIGKILL after the grace if
// the command has not exited by then.
func (c *directChild) stop() {
	c.once.Do(func() {
		signalGroup(c.pid(), syscall.SIGTERM)
		go func() {
			t := time.NewTimer(c.grace)
			defer t.Stop()
			select {
			case <-t.C:
				signalGroup(c.pid(), syscall.SIGKILL)
			case <-c.ended:
			}
		}()
	})
}

// signalGroup sends s to the command's process group (the command and its
// children), falling back to the command alone.
func signalGroup(pid int, s syscall.Signal) {
	if err := syscall.Kill(-pid, s); err != nil {
		_ = syscall.Kill(pid, s)
	}
}

// supervisorCommand is lease run's process supervisor on Linux; there is
// none elsewhere.
func supervisorCommand(_ []string, stderr io.Writer) int {
	return fail(stderr, "run-supervisor", exitUsage, "internal command of lease run, on Linux only")
}
