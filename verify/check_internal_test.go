// Unit tests of the checker on hand-made histories.

package verify

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func TestHistoryUnknownAfterEnd(t *testing.T) {
	recs := []record{
		{W: 0, Op: "acquire", Call: 10, Ret: 20, Fence: 1, OK: true},
		{W: 0, Op: "read", Call: 30, Ret: 40, Fence: 1, OK: true},
		{W: 0, Op: "write", Call: 50, Ret: 60, Fence: 1, Value: 1, OK: true},
		// Begun after the nemesis ended (end = 100), cut short by the
		// workers' SIGTERM: outcome unknown.
		{W: 0, Op: "read", Call: 150, Fence: 1},
	}
	if res := porcupine.CheckOperations(model.ToModel(), history(recs, 100)); !res {
		t.Errorf("a history with an unknown operation begun after the run's end does not linearize")
	}
}
