//go:build linux

// Package usertest creates a throwaway local user for tests that play a
// second user of the host (an attacker sharing /tmp, a neighbour with read
// access), and runs commands as that user.
package usertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// User is a local user created for one test.
type User struct {
	Name     string
	UID, GID uint32
}

// New creates a local user with its own group and no home directory,
// removed (with its group) when the test ends. The test is skipped when the
// process is not root or useradd is missing; CI runs as root.
func New(t testing.TB) *User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a second local user (useradd); CI runs as root")
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		useradd = "/usr/sbin/useradd"
		if _, err := os.Stat(useradd); err != nil {
			t.Skip("useradd not found: cannot create a second local user")
		}
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "lktest" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := retryLocked(ctx, useradd, "--user-group", "--no-create-home",
		"--shell", "/usr/sbin/nologin", "--comment", "leasekit test user", name); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		userdel := "userdel"
		if _, err := exec.LookPath(userdel); err != nil {
			userdel = "/usr/sbin/userdel"
		}
		if out, err := retryLocked(ctx, userdel, name); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("looking up the new user %s: %v", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("user %s has uid %q, gid %q", name, u.Uid, u.Gid)
	}
	return &User{Name: name, UID: uint32(uid), GID: uint32(gid)}
}

// retryLocked runs a user-database command, again while it fails because
// another one (a test of another package, run at the same time) holds the
// lock on /etc/passwd or /etc/group.
func retryLocked(ctx context.Context, name string, args ...string) ([]byte, error) {
	for {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "lock") || ctx.Err() != nil {
			return out, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Command returns a command that runs name with args as u (its uid, its
// group and no supplementary groups), in the working directory "/".
func (u *User) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}}
	return cmd
}

// Run runs name with args as u and returns its combined output.
func (u *User) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return u.Command(ctx, name, args...).CombinedOutput()
}
