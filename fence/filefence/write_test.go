//go:build linux

package filefence_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasekit/lease/fence/filefence"
	"github.com/leasekit/lease/fence/internal/fencetest"
)

// TestWriteFile runs the fenced-write scenario and checks that only the
// file and its fence file are left.
func TestWriteFile(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fencetest.Resource {
		dir := t.TempDir()
		name := filepath.Join(dir, "state")
		t.Cleanup(func() {
			ents, _ := os.ReadDir(dir)
			if len(ents) != 2 || ents[0].Name() != "state" || ents[1].Name() != "state.fence" {
				t.Errorf("%s holds %v, want state and state.fence", dir, ents)
			}
		})
		return fencetest.Resource{
			Write: func(_ context.Context, fence uint64, v string) error {
				return filefence.WriteFile(name, fence, []byte(v), 0o600)
			},
			Read: func(context.Context) (string, error) {
				b, err := os.ReadFile(name)
				return string(b), err
			},
		}
	})
}
