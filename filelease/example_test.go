//go:build linux

// Example: a lease Client over the file store (compiled and run).

package filelease_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/filelease"
)

func ExampleNew() {
	tmp, err := os.MkdirTemp("", "filelease-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)

	// Every process of the host that opens this directory shares its leases.
	store, err := filelease.New(filepath.Join(tmp, "leases"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	client, err := lease.New(store, lease.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	err = client.Do(context.Background(), "nightly-report", func(ctx context.Context, l *lease.Lease) error {
		fmt.Println("running with fence", l.Fence())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	info, err := store.Inspect(context.Background(), "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held after Do:", info.Held, "last fence:", info.Fence)
	// Output:
	// running with fence 1
	// held after Do: false last fence: 1
}
