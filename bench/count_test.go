package main

import (
	"testing"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/memlease"
)

// TestCountStoreKeepsInterfaces: the counting wrapper has exactly the
// optional interfaces of the store it wraps, so that the Client batches
// acquisitions and releases as it would without it.
func TestCountStoreKeepsInterfaces(t *testing.T) {
	mem := memlease.New()
	defer mem.Close()
	file, err := filelease.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, st := range []driver.Store{mem, file, memlease.Plain(mem)} {
		w, _, err := countStore(st)
		if err != nil {
			t.Errorf("%T: %v", st, err)
			continue
		}
		if got, want := optionals(w), optionals(st); got != want {
			t.Errorf("%T wrapped has %s, want %s", st, got, want)
		}
	}
	if got := optionals(mem); got != "[BatchRenewer BatchAcquirer BatchReleaser Notifier Lister Breaker]" {
		t.Errorf("memlease has %s, want every optional interface", got)
	}
	// A set no wrapper has is refused, not hidden.
	odd := struct {
		driver.Store
		driver.BatchRenewer
		driver.BatchAcquirer
	}{mem, mem, mem}
	if _, _, err := countStore(odd); err == nil {
		t.Errorf("wrapping a store with %s: no error", optionals(odd))
	}
}
