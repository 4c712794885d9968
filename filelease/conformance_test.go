//go:build linux

// The leasetest conformance suite against the file store: every namespace is
// a directory of its own under the test's temporary directory.

package filelease_test

import (
	"path/filepath"
	"testing"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/leasetest"
)

func TestConformanceFile(t *testing.T) {
	base := t.TempDir()
	leasetest.Run(t, leasetest.Harness{
		NewStore: func(t testing.TB, ns string) driver.Store {
			s, err := filelease.New(filepath.Join(base, ns))
			if err != nil {
				t.Fatalf("filelease.New: %v", err)
			}
			return s
		},
	})
}
