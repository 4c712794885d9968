//go:build linux

// The leasetest conformance suite against the file store: every namespace is
// a directory of its own under the test's temporary directory.

package filelease_test

import (
	"path/filepath"
	"testing"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/leasetest"
)

// harness returns the suite's harness: stores over directories under base.
func harness(base string) leasetest.Harness {
	return leasetest.Harness{
		NewStore: func(t testing.TB, ns string) lease.Store {
			s, err := filelease.New(filepath.Join(base, ns))
			if err != nil {
				t.Fatalf("filelease.New: %v", err)
			}
			return s
		},
	}
}

func TestConformance(t *testing.T) {
	leasetest.Run(t, harness(t.TempDir()))
}
