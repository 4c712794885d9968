// The demo's fenced resource: a register in a file that accepts a write only
// if it carries a fence at least as large as the largest it has seen.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// register is a file-backed fenced register shared by the demo's processes.
// Every write takes an exclusive flock on path+".lock", so check-and-write is
// atomic across processes.
type register struct{ path string }

// registerState is the register's content.
type registerState struct {
	Fence uint64 `json:"fence"`
	Value string `json:"value"`
}

// staleError reports a write rejected for its fence.
type staleError struct{ fence, seen uint64 }

func (e *staleError) Error() string {
	return fmt.Sprintf("stale fence %d < %d: write rejected", e.fence, e.seen)
}

// write stores value if fence ≥ the largest fence seen, else returns a
// *staleError.
func (r register) write(fence uint64, value string) error {
	lf, err := os.OpenFile(r.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("flock %s: %w", lf.Name(), err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too
	st, err := r.read()
	if err != nil {
		return err
	}
	if fence < st.Fence {
		return &staleError{fence: fence, seen: st.Fence}
	}
	b, err := json.Marshal(registerState{Fence: fence, Value: value})
	if err != nil {
		return err
	}
	tmp := r.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, r.path)
}

// read returns the register's content (zero when it was never written).
func (r register) read() (registerState, error) {
	var st registerState
	b, err := os.ReadFile(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("register %s: %w", r.path, err)
	}
	return st, nil
}
