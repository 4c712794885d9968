// Forced releases on every store: an operator breaks the holder's lease
// (Client.ForceRelease) while it works; the next holder's larger fence must
// refuse the evicted holder's writes.

package verify_test

import (
	"testing"

	"github.com/leasekit/lease/verify"
)

func TestForcedRelease(t *testing.T) {
	t.Parallel()
	for _, sc := range append(workloadStores[:len(workloadStores):len(workloadStores)], exclusiveStores...) {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sc.setup(t)
			cfg.Faults = []string{verify.FaultBreak, verify.FaultKill}
			check(t, run(t, cfg), verify.FaultBreak)
		})
	}
}
