//go:build linux

package leasedebug_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The page in a real browser: headless Chromium (Debian's chromium package)
// renders it under its Content-Security-Policy. LEASE_TEST_CHROMIUM=1
// (scripts/test) makes a missing chromium a failure; LEASE_TEST_SCREENSHOT=
// FILE saves a screenshot of the page (docs/debug-leases.png):
//
//	LEASE_TEST_SCREENSHOT=$PWD/docs/debug-leases.png go test -run TestChromium ./leasedebug/

func TestChromium(t *testing.T) {
	bin := chromium(t)
	srv, l := serve(t)
	url := srv.URL + "/debug/leases?refresh=0"

	dom, log := runChromium(t, bin, "--dump-dom", url)
	if strings.Contains(log, "Content Security Policy") {
		t.Errorf("Chromium blocked part of the page:\n%s", log)
	}
	held := table(t, dom, "leases-1")
	for _, want := range []string{`data-key="job:invoice"`, "<td>worker-1</td>", "<td>exclusive</td>"} {
		if !strings.Contains(held, want) {
			t.Errorf("Chromium's DOM of the held leases lacks %q:\n%s", want, held)
		}
	}
	waiting := table(t, dom, "waiters-2")
	for _, want := range []string{`data-key="job:invoice"`, "<td>worker-2</td>", "<td>worker-1</td>"} {
		if !strings.Contains(waiting, want) {
			t.Errorf("Chromium's DOM of the waiters lacks %q:\n%s", want, waiting)
		}
	}
	if strings.Contains(dom, l.Token()) {
		t.Error("the page shows a token")
	}

	if file := os.Getenv("LEASE_TEST_SCREENSHOT"); file != "" {
		file, err := filepath.Abs(file)
		if err != nil {
			t.Fatal(err)
		}
		runChromium(t, bin, "--screenshot="+file, "--window-size=1200,760", "--hide-scrollbars", url)
		if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
			t.Fatalf("no screenshot: %v", err)
		}
		t.Logf("screenshot: %s", file)
	}
}

// chromium returns the path of the chromium binary, or skips the test.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("LEASE_TEST_CHROMIUM") == "1" {
		t.Fatal("LEASE_TEST_CHROMIUM=1 but no chromium in PATH (apt-get install chromium)")
	}
	t.Skip("no chromium in PATH (apt-get install chromium); LEASE_TEST_CHROMIUM=1 makes this a failure")
	return ""
}

// runChromium runs headless Chromium with args for at most a minute, in a
// process group of its own that is killed when it ends, with a profile,
// home and caches in a directory removed afterwards. It returns stdout and
// stderr (console messages included).
func runChromium(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "leasedebug-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer removeAll(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{
		"--headless", "--no-sandbox", "--disable-background-networking", "--disable-gpu",
		"--no-first-run", "--disable-extensions", "--user-data-dir=" + filepath.Join(dir, "profile"),
		"--enable-logging=stderr", "--v=0",
	}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_CACHE_HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind
	}
	if err != nil {
		t.Fatalf("chromium %s: %v (after %v)\n%s", strings.Join(args, " "), err, ctx.Err(), errb.String())
	}
	return out.String(), errb.String()
}

// removeAll removes dir, retrying while Chromium's killed helpers may still
// write into it.
func removeAll(t *testing.T, dir string) {
	var err error
	for range 50 {
		if err = os.RemoveAll(dir); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("removing Chromium's directory: %v", err)
}
