// lease run's supervision of the command: start it, forward signals, stop it
// when the lease is lost, and turn its end into an exit code. How the
// command's processes are started and ended is the platform's (child_*.go).

package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/leasekit/lease"
)

// child is the running command as lease run sees it: the command and, where
// the platform allows, every process it starts.
type child interface {
	// pid is the command's process id.
	pid() int
	// exited is closed when the command itself has exited; processes it
	// left running may still be running.
	exited() <-chan struct{}
	// left is how many processes the command left running when it exited
	// (valid once exited is closed; 0 where the platform cannot tell).
	left() int
	// done is closed when the command and every process it left running
	// have ended (where the platform cannot end those: when the command
	// has exited).
	done() <-chan struct{}
	// code is the command's exit code, or 128+N if signal N ended it
	// (valid once done is closed).
	code() int
	// signal forwards s to the command's process group.
	signal(s syscall.Signal)
	// stop ends the command and what it started: SIGTERM, then SIGKILL after
	// the grace given to startChild.
	stop()
}

// supervise runs argv with env under l until it and what it started have
// ended, and returns lease run's exit code: the command's own, or exitLost
// if a lease was lost meanwhile.
func (f *runFlags) supervise(argv []string, l holding, env []string, sigs <-chan os.Signal, log *slog.Logger, stderr io.Writer) int {
	c, code, err := startChild(argv, env, f.grace)
	if err != nil {
		return fail(stderr, "run", code, "%v", err)
	}
	log.Debug("command started", "pid", c.pid())

	var (
		lost   = l.Context().Done()
		lostAt time.Time
		exited = c.exited()
	)
	for {
		select {
		case <-exited:
			exited = nil
			if n := c.left(); n > 0 && lostAt.IsZero() {
				log.Warn("the command exited and left processes running: SIGTERM, then SIGKILL after --grace; the lease is released after them",
					"processes", n, "grace", f.grace)
			}
		case <-c.done():
			code := c.code()
			if !lostAt.IsZero() {
				log.Error("the command ended after the lease was lost", "command_exit", code, "exit_code", exitLost)
				return exitLost
			}
			log.Debug("command exited", "exit_code", code)
			return code
		case s := <-sigs:
			log.Info("forwarding signal to the command", "signal", s.String(), "pid", c.pid())
			c.signal(s.(syscall.Signal))
		case <-lost:
			lost = nil
			if !errors.Is(l.Err(), lease.ErrLost) {
				continue // released: only lease run itself releases, after the command
			}
			lostAt = time.Now()
			log.Error("lease lost: stopping the command (SIGTERM, then SIGKILL after --grace)", "err", l.Err(), "grace", f.grace)
			c.stop()
		}
	}
}

// exitCode turns a process's end into an exit code: its own status, or
// 128+N when signal N killed it.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// startError maps a failure to start the command to lease run's exit code:
// 127 when it was not found, 126 when it could not be executed.
func startError(err error) int {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return exitNotFound
	}
	return exitCannotExec
}
