// The leasetest conformance suite on the shared server.

package natslease_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
)

func TestConformanceNATS(t *testing.T) {
	// One connection for the suite, made before Run so that its goroutines
	// predate the leak checks.
	_, js := connect(t, natsURL(t))
	if _, err := newStore(t, js, testNS()).Inspect(testCtx(t, 10*time.Second), "warm-up"); err != nil {
		t.Fatal(err) // the first request starts the connection's reply subscription
	}
	leasetest.Run(t, leasetest.Harness{
		NewStore: func(t testing.TB, ns string) driver.Store { return newStore(t, js, ns) },
	})
}
