// Examples: wiring a Redis store into a lease Client (compiled, not run).

package redislease_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/leasekit/lease/redislease"
	"github.com/redis/go-redis/v9"
)

func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{
		Addr:      "redis.example.com:6380",
		Username:  "leases",
		Password:  os.Getenv("REDIS_PASSWORD"),
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, ServerName: "redis.example.com"},
	})
	defer rdb.Close() // the store never closes the client

	store, err := redislease.New(rdb, redislease.WithPrefix("billing:lease:"))
	if err != nil {
		log.Fatal(err)
	}
	// Hand store to lease.New; here it is inspected directly.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := store.Inspect(ctx, "nightly-invoices")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Held, info.Holder)
}
