// The command of lease run on Linux: started by a supervisor process (this
// binary as the hidden "lease run-supervisor", supervisor_linux.go) that
// ends every process of the command when the command exits, when lease run
// says so, and when lease run dies, even by kill -9.

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// supervisedChild is the command as seen through its supervisor's pipes.
type supervisedChild struct {
	sup     *exec.Cmd
	ctl     *os.File // write end of the control pipe; closing it stops everything
	cpid    int
	mu      sync.Mutex // guards ctl writes
	exitedC chan struct{}
	doneC   chan struct{}
	status  int // the command's exit code, set before exitedC closes
	nLeft   int // processes it left running, set before exitedC closes
}

// startChild starts the supervisor, which starts argv with env; it returns
// the exit code lease run ends with when the command cannot be started.
func startChild(argv, env []string, grace time.Duration) (child, int, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, exitSoftware, fmt.Errorf("supervisor pipe: %w", err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, exitSoftware, fmt.Errorf("supervisor pipe: %w", err)
	}
	// /proc/self/exe is this binary even if its file was replaced or removed
	// since lease run started.
	sup := exec.Command("/proc/self/exe", append([]string{"run-supervisor", "--grace", grace.String(), "--"}, argv...)...)
	sup.Args[0] = "lease"
	sup.Stdin, sup.Stdout, sup.Stderr = os.Stdin, os.Stdout, os.Stderr
	sup.Env = env
	sup.ExtraFiles = []*os.File{ctlR, repW} // fds 3 and 4: ctlFD, reportFD
	// Its own process group: a terminal's Ctrl-C or a kill of lease run's
	// group does not reach it, so it outlives lease run to clean up.
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = sup.Start()
	ctlR.Close()
	repW.Close()
	if err != nil {
		ctlW.Close()
		repR.Close()
		return nil, exitSoftware, fmt.Errorf("start the supervisor: %w", err)
	}
	c := &supervisedChild{sup: sup, ctl: ctlW, exitedC: make(chan struct{}), doneC: make(chan struct{})}
	lines := bufio.NewScanner(repR)
	verb, arg := next(lines)
	switch verb {
	case "started":
		c.cpid, _ = strconv.Atoi(arg)
	case "failed":
		codeText, msg, _ := strings.Cut(arg, " ")
		code, cerr := strconv.Atoi(codeText)
		if cerr != nil {
			code = exitSoftware
		}
		c.wait(repR)
		return nil, code, errors.New(msg)
	default:
		c.wait(repR)
		return nil, exitSoftware, errors.New("the supervisor process ended before starting the command")
	}
	go func() {
		defer close(c.doneC)
		defer c.wait(repR) // before done: the supervisor exits right after "done"
		exited := false
		for {
			verb, arg := next(lines)
			switch verb {
			case "exited":
				codeText, leftText, _ := strings.Cut(arg, " ")
				c.status, _ = strconv.Atoi(codeText)
				c.nLeft, _ = strconv.Atoi(leftText)
				exited = true
				close(c.exitedC)
			case "done":
				return
			case "": // the supervisor died without saying: killed
				if !exited {
					c.status = exitSoftware
					close(c.exitedC)
				}
				return
			}
		}
	}()
	return c, exitOK, nil
}

// next reads one report line as its verb and the rest.
func next(sc *bufio.Scanner) (verb, arg string) {
	if !sc.Scan() {
		return "", ""
	}
	verb, arg, _ = strings.Cut(sc.Text(), " ")
	return verb, arg
}

// wait reaps the supervisor and closes the pipes.
func (c *supervisedChild) wait(rep *os.File) {
	_ = c.sup.Wait()
	rep.Close()
	c.mu.Lock()
	c.ctl.Close()
	c.mu.Unlock()
}

func (c *supervisedChild) pid() int                { return c.cpid }
func (c *supervisedChild) exited() <-chan struct{} { return c.exitedC }
func (c *supervisedChild) left() int               { return c.nLeft }
func (c *supervisedChild) done() <-chan struct{}   { return c.doneC }
func (c *supervisedChild) code() int               { return c.status }

func (c *supervisedChild) signal(s syscall.Signal) { c.send("signal " + strconv.Itoa(int(s))) }
func (c *supervisedChild) stop()                   { c.send("stop") }

// send writes one control line; a supervisor already gone does not need it.
func (c *supervisedChild) send(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.ctl.Write([]byte(line + "\n"))
}
