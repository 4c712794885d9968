// Command fill holds many keys in a store for a while, to measure listing
// them (`lease list`): it acquires -n keys named PREFIXNNNNN at the store
// level with a long TTL, and exits; the keys stay held until the TTL runs
// out. From bench/:
//
//	go run ./fill -store redis://127.0.0.1:6379/0 -n 10000 -ttl 10m
//	/usr/bin/time -f '%e s, %M KiB max RSS' lease list -s redis://127.0.0.1:6379/0 fill/ > /dev/null
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leaseurl"
)

func main() {
	var (
		url    = flag.String("store", "", "store URL (leaseurl)")
		n      = flag.Int("n", 10000, "keys to hold")
		ttl    = flag.Duration("ttl", 10*time.Minute, "their TTL")
		prefix = flag.String("prefix", "fill/", "key prefix")
		par    = flag.Int("par", 32, "acquisitions in flight")
	)
	flag.Parse()
	ctx := context.Background()
	s, err := leaseurl.Open(ctx, *url)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	var failed atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int)
	for range *par {
		wg.Go(func() {
			for i := range next {
				b := make([]byte, 16)
				if _, err := rand.Read(b); err != nil {
					log.Fatal(err)
				}
				r := driver.Request{Key: fmt.Sprintf("%s%05d", *prefix, i), Token: hex.EncodeToString(b), Holder: "fill", TTL: *ttl}
				if _, err := s.Acquire(ctx, r); err != nil && failed.Add(1) == 1 {
					log.Printf("acquire %s: %v", r.Key, err)
				}
			}
		})
	}
	for i := range *n {
		next <- i
	}
	close(next)
	wg.Wait()
	fmt.Printf("held %d keys (%d failed) in %v, TTL %v\n", *n-int(failed.Load()), failed.Load(), time.Since(start).Round(time.Millisecond), *ttl)
}
