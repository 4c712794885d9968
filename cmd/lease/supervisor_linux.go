// lease run-supervisor (hidden, Linux): the process between lease run and
// its command that makes sure no process of the command outlives lease run.
//
// It makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so that
// every process the command starts stays below it even when its parent
// exits (double fork, setsid, nohup); starts the command; and obeys lease
// run through two pipes. When the command exits, or lease run says stop, or
// lease run dies (its end of the control pipe closes, even after kill -9),
// it sends SIGTERM to every process below it, SIGKILL after the grace, and
// exits once none is left.

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasekit/lease/internal/oneline"
)

// The supervisor's pipes, as file descriptors in the supervisor.
const (
	ctlFD    = 3 // lease run → supervisor: "signal N", "stop"; EOF: lease run is gone
	reportFD = 4 // supervisor → lease run: "started PID", "failed CODE MSG", "exited CODE LEFT", "done"
)

// killEvery is how often SIGKILL is repeated after the grace, for processes
// forked while the previous round was sent.
const killEvery = 50 * time.Millisecond

func supervisorCommand(args []string, stderr io.Writer) int {
	var grace time.Duration
	fs := newFlagSet("run-supervisor", "--grace D -- CMD [ARGS...]", stderr)
	fs.DurationVar(&grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if fs.NArg() == 0 || grace < 0 {
		return fail(stderr, "run-supervisor", exitUsage, "internal command of lease run")
	}
	// The pipes must not reach the command: a process holding the report
	// pipe would keep lease run waiting.
	syscall.CloseOnExec(ctlFD)
	syscall.CloseOnExec(reportFD)
	ctl := os.NewFile(ctlFD, "lease-run-control")
	rep := os.NewFile(reportFD, "lease-run-report")
	if ctl == nil || rep == nil {
		return fail(stderr, "run-supervisor", exitUsage, "internal command of lease run")
	}
	report := func(format string, args ...any) {
		// lease run may be gone (EPIPE): the supervisor carries on alone.
		_, _ = fmt.Fprintf(rep, format+"\n", args...)
	}
	s := &supervisor{grace: grace, self: os.Getpid(), report: report}
	return s.run(fs.Args(), ctl)
}

type supervisor struct {
	grace  time.Duration
	self   int
	report func(format string, args ...any)
}

func (s *supervisor) run(argv []string, ctl io.Reader) int {
	// Signals sent to the supervisor itself (it is in its own process group,
	// so only deliberate ones) are not the command's business: lease run
	// forwards those it means. Catching them (rather than ignoring them)
	// leaves the command's signal dispositions at their defaults.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		s.report("failed %d %s", exitSoftware, oneline.Join(fmt.Sprintf("become a subreaper: %v", err)))
		return exitSoftware
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Its own process group, so that forwarded signals reach its children;
	// SIGKILL if the supervisor dies, which only a deliberate kill does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The parent-death signal is tied to the thread that forks: this
	// goroutine keeps its thread for the supervisor's whole life.
	runtime.LockOSThread()
	if err := cmd.Start(); err != nil {
		s.report("failed %d %s", startError(err), oneline.Join(err.Error()))
		return startError(err)
	}
	cpid := cmd.Process.Pid
	s.report("started %d", cpid)

	cmdExit := make(chan syscall.WaitStatus, 1)
	allGone := make(chan struct{})
	go reap(cpid, cmdExit, allGone)
	ctlLines := make(chan string)
	go func() {
		defer close(ctlLines)
		sc := bufio.NewScanner(ctl)
		for sc.Scan() {
			ctlLines <- sc.Text()
		}
	}()

	var (
		exited   bool
		code     int
		stopping bool
		killAt   <-chan time.Time
		killTick <-chan time.Time
	)
	terminate := func() {
		if stopping {
			return
		}
		stopping = true
		signalTree(s.self, syscall.SIGTERM)
		killAt = time.After(s.grace)
	}
	commandExited := func(ws syscall.WaitStatus) {
		exited, code = true, exitCode(ws)
		left := len(descendants(s.self))
		s.report("exited %d %d", code, left)
		if left > 0 {
			terminate() // nothing may work unleased once lease run releases
		}
	}
	ticker := time.NewTicker(killEvery)
	ticker.Stop()
	defer ticker.Stop()
	for {
		select {
		case ws := <-cmdExit:
			commandExited(ws)
		case <-allGone:
			if !exited { // reap sent the command's status before closing allGone
				commandExited(<-cmdExit)
			}
			s.report("done")
			return code
		case line, ok := <-ctlLines:
			if !ok { // lease run is gone: its lease is no longer renewed
				ctlLines = nil
				terminate()
				continue
			}
			s.control(line, cpid, exited, terminate)
		case <-killAt:
			killAt = nil
			ticker.Reset(killEvery)
			killTick = ticker.C
			signalTree(s.self, syscall.SIGKILL)
		case <-killTick:
			signalTree(s.self, syscall.SIGKILL)
		case <-sigs:
		}
	}
}

// control obeys one line from lease run.
func (s *supervisor) control(line string, cpid int, exited bool, terminate func()) {
	verb, arg, _ := strings.Cut(line, " ")
	switch verb {
	case "stop":
		terminate()
	case "signal":
		n, err := strconv.Atoi(arg)
		if err != nil {
			return
		}
		sig := syscall.Signal(n)
		if exited {
			signalTree(s.self, sig) // what the command left running
			return
		}
		if err := syscall.Kill(-cpid, sig); err != nil {
			_ = syscall.Kill(cpid, sig)
		}
	}
}

// reap waits for every child of the supervisor: the command, whose status it
// sends on cmdExit, and the orphans that the kernel gives a subreaper. It
// closes allGone when the supervisor has no child left, which, as it is a
// subreaper, means that no process of the command is left.
func reap(cpid int, cmdExit chan<- syscall.WaitStatus, allGone chan<- struct{}) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil: // ECHILD: none left
			close(allGone)
			return
		case pid == cpid:
			cmdExit <- ws
		}
	}
}
