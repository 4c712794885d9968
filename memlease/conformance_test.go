package memlease_test

import (
	"sync"
	"testing"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// namespaces returns a NewStore for leasetest.Harness: one Store per
// namespace, a new handle per call; wrap turns a handle into the store under
// test.
func namespaces(wrap func(*memlease.Store) lease.Store) func(testing.TB, string) lease.Store {
	var mu sync.Mutex
	roots := make(map[string]*memlease.Store)
	return func(_ testing.TB, ns string) lease.Store {
		mu.Lock()
		defer mu.Unlock()
		root, ok := roots[ns]
		if !ok {
			root = memlease.New()
			roots[ns] = root
		}
		return wrap(root.Handle())
	}
}

func TestConformance(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{
		NewStore: namespaces(func(s *memlease.Store) lease.Store { return s }),
	})
}

func TestConformancePlain(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{NewStore: namespaces(memlease.Plain)})
}
