// lease run's supervision of the command: start it, forward signals, stop it
// when the lease is lost, and turn its end into an exit code.

package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/leasekit/lease"
)

// supervise runs argv under l until it exits and returns lease run's exit
// code: the command's own, or exitLost if the lease was lost meanwhile.
func (f *runFlags) supervise(argv []string, l *lease.Lease, sigs <-chan os.Signal, log *slog.Logger, stderr io.Writer) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = childEnv(l)
	cmd.SysProcAttr = childAttr()

	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		// The parent-death signal (Linux) is tied to the thread that started
		// the child: keep this goroutine on its thread until the child ends.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return fail(stderr, "run", code, "%v", err)
	}
	pid := cmd.Process.Pid
	log.Debug("command started", "pid", pid)

	var (
		lost      = l.Done()
		lostAt    time.Time
		killTimer <-chan time.Time
	)
	for {
		select {
		case err := <-exited:
			code := exitCode(cmd.ProcessState, err)
			if !lostAt.IsZero() {
				log.Error("the command ended after the lease was lost", "command_exit", code, "exit_code", exitLost)
				return exitLost
			}
			log.Debug("command exited", "exit_code", code)
			return code
		case s := <-sigs:
			log.Info("forwarding signal to the command", "signal", s.String(), "pid", pid)
			signalGroup(pid, s.(syscall.Signal))
		case <-lost:
			lost = nil
			if !errors.Is(l.Err(), lease.ErrLost) {
				continue // released: only lease run itself releases, after the command
			}
			lostAt = time.Now()
			log.Error("lease lost: stopping the command (SIGTERM, then SIGKILL after --grace)", "err", l.Err(), "fence", l.Fence(), "grace", f.grace)
			signalGroup(pid, syscall.SIGTERM)
			t := time.NewTimer(f.grace)
			defer t.Stop()
			killTimer = t.C
		case <-killTimer:
			killTimer = nil
			log.Error("the command outlived --grace after the loss: SIGKILL", "pid", pid)
			signalGroup(pid, syscall.SIGKILL)
		}
	}
}

// signalGroup sends s to the command's process group (the command and its
// children), falling back to the command alone.
func signalGroup(pid int, s syscall.Signal) {
	if err := syscall.Kill(-pid, s); err != nil {
		_ = syscall.Kill(pid, s)
	}
}

// exitCode turns the command's end into an exit code: its own status, or
// 128+N when signal N killed it.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return exitSoftware
		}
		return exitOK
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
