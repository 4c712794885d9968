//go:build linux

package filefence_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence/filefence"
)

// A holder with fence 12 writes; a paused one with fence 11 is refused.
func ExampleWriteFile() {
	dir, err := os.MkdirTemp("", "filefence")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	state := filepath.Join(dir, "state.json")

	if err := filefence.WriteFile(state, 12, []byte(`{"run":12}`), 0o644); err != nil {
		log.Fatal(err)
	}
	err = filefence.WriteFile(state, 11, []byte(`{"run":11}`), 0o644)
	fmt.Println(errors.Is(err, lease.ErrStaleFence))
	b, _ := os.ReadFile(state)
	fmt.Println(string(b))
	// Output:
	// true
	// {"run":12}
}
