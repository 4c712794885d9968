// lease demo-worker (hidden): one worker process of lease demo. It reports
// what happens to it as JSON lines on stdout and takes orders on stdin.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// workerEvent is one line a worker prints.
type workerEvent struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"` // waiting, acquired, renewed, check, write, lost, released, error
	Fence       uint64 `json:"fence,omitempty"`
	Holder      string `json:"holder,omitempty"`
	HolderFence uint64 `json:"holder_fence,omitempty"`
	Held        bool   `json:"held,omitempty"`
	OK          bool   `json:"ok,omitempty"`
	Stale       bool   `json:"stale,omitempty"`
	Millis      int64  `json:"ms,omitempty"` // wait or remaining TTL
	Micros      int64  `json:"us,omitempty"` // renewal latency
	Err         string `json:"err,omitempty"`
}

// demoStoreEnv carries the store URL from lease demo to its workers, off
// their command lines.
const demoStoreEnv = "LEASEKIT_DEMO_STORE"

func demoWorkerCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var c common
	var key, name, regPath string
	var ttl time.Duration
	fs := newFlagSet("demo-worker", "[flags]", stderr)
	c.register(fs)
	fs.StringVar(&key, "key", "job:invoice-generation", "lease key")
	fs.StringVar(&name, "name", "worker", "holder name")
	fs.StringVar(&regPath, "register", "", "fenced register file")
	fs.DurationVar(&ttl, "ttl", 2*time.Second, "lease TTL")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if err := checkDuration("ttl", ttl, lease.MinTTL, maxDemoTTL); err != nil {
		return fail(stderr, "demo-worker", exitUsage, "%v", err)
	}
	if c.store == "" {
		c.store = os.Getenv(demoStoreEnv)
	}
	log, err := c.logger(stderr)
	if err != nil {
		return fail(stderr, "demo-worker", exitUsage, "%v", err)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(stdout)
	emit := func(e workerEvent) {
		e.Name = name
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
	ctx := context.Background()
	store, _, code, err := c.openStore(ctx, log)
	if err != nil {
		return fail(stderr, "demo-worker", code, "%v", err)
	}
	defer store.Close()
	obs := lease.ObserverFunc(func(e lease.Event) {
		if e.Kind == lease.EventRenewed {
			emit(workerEvent{Kind: "renewed", Fence: e.Fence, Micros: e.Latency.Microseconds()})
		}
	})
	client, err := lease.New(store, lease.WithTTL(ttl), lease.WithHolder(name), lease.WithObserver(obs), lease.WithLogger(log))
	if err != nil {
		return fail(stderr, "demo-worker", exitUsage, "%v", err)
	}
	defer client.Close()

	start := time.Now()
	l, err := client.TryAcquire(ctx, key)
	var held *lease.HeldError
	if errors.As(err, &held) {
		emit(workerEvent{Kind: "waiting", Holder: held.Holder, HolderFence: held.Fence, Millis: held.Remaining.Milliseconds()})
		l, err = client.Acquire(ctx, key)
	}
	if err != nil {
		emit(workerEvent{Kind: "error", Err: err.Error()})
		return exitUnavailable
	}
	emit(workerEvent{Kind: "acquired", Fence: l.Fence(), Millis: time.Since(start).Milliseconds()})
	go func() {
		<-l.Done()
		if err := l.Err(); errors.Is(err, lease.ErrLost) {
			emit(workerEvent{Kind: "lost", Fence: l.Fence(), Err: err.Error()})
		}
	}()

	reg := register{path: regPath}
	write := func(stale bool) {
		if !stale && l.Err() != nil {
			emit(workerEvent{Kind: "write", Fence: l.Fence(), Err: "not written: " + l.Err().Error()})
			return
		}
		err := reg.write(l.Fence(), "invoices by "+name)
		e := workerEvent{Kind: "write", Fence: l.Fence(), OK: err == nil, Stale: stale}
		if err != nil {
			e.Err = err.Error()
		}
		emit(e)
	}
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		switch strings.TrimSpace(sc.Text()) {
		case "check":
			emit(workerEvent{Kind: "check", Fence: l.Fence(), Held: l.Err() == nil, Millis: l.Remaining().Milliseconds()})
		case "write": // a careful write: only while the lease is held
			write(false)
		case "write-stale": // the write this worker decided on before it froze
			write(true)
		case "release":
			rctx, cancel := context.WithTimeout(ctx, ttl)
			err := l.Release(rctx)
			cancel()
			e := workerEvent{Kind: "released", Fence: l.Fence(), OK: err == nil}
			if err != nil {
				e.Err = err.Error()
			}
			emit(e)
			return exitOK
		}
	}
	return exitOK
}
