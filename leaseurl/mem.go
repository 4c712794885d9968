// The mem:// scheme: memlease stores shared by name within one process.

package leaseurl

import (
	"context"
	"net/url"
	"sync"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

func init() { Register("mem", openMem) }

var (
	memMu     sync.Mutex
	memStores = map[string]*memlease.Store{}
)

// openMem returns a new handle on the process-wide in-memory store named by
// the URL's host and path ("mem://" and "mem://default" are the same store).
// Every Open of the same name shares keys, as separate processes share a
// backend; the handle's Close leaves the others open. Leases in memory are
// not visible to other processes: mem:// is for tests and examples.
//
// max_waiters sets the cap of each key's queue when the first Open of a name
// creates its store; a later Open of that name with another value fails.
func openMem(_ context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	maxw, setMax, err := o.maxWaiters()
	if err != nil {
		return nil, nil, err
	}
	name := u.Host + u.Path
	if u.Opaque != "" {
		name = u.Opaque
	}
	if name == "" {
		name = "default"
	}
	memMu.Lock()
	defer memMu.Unlock()
	root, ok := memStores[name]
	if !ok {
		if !setMax {
			maxw = driver.DefaultMaxWaiters
		}
		root = memlease.New(memlease.WithMaxWaiters(maxw))
		memStores[name] = root
	} else if setMax && root.Caps().MaxWaiters != maxw {
		return nil, nil, lease.Invalid("max_waiters", "mem store %q is already open with max_waiters=%d", name, root.Caps().MaxWaiters)
	}
	return root.Handle(), nil, nil
}
