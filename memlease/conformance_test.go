package memlease_test

import (
	"sync"
	"testing"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// namespaces returns a NewStore for leasetest.Harness: one Store per
// namespace, a new handle per call; wrap turns a handle into the store under
// test.
func namespaces(wrap func(*memlease.Store) driver.Store) func(testing.TB, string) driver.Store {
	var mu sync.Mutex
	roots := make(map[string]*memlease.Store)
	return func(_ testing.TB, ns string) driver.Store {
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
		NewStore: namespaces(func(s *memlease.Store) driver.Store { return s }),
	})
}

func TestConformancePlain(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{NewStore: namespaces(memlease.Plain)})
}
