// The worker process: acquire, fenced read, fenced write, release, forever,
// reporting every operation as a JSON line on stdout.

package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leaseurl"
)

// workerEnv carries a worker's configuration (JSON) to the re-executed binary.
const workerEnv = "LEASEKIT_VERIFY_WORKER"

// workerConfig is what one worker process is told.
type workerConfig struct {
	ID       int           `json:"id"`
	Store    string        `json:"store"` // URL, possibly through a proxy
	Prefix   string        `json:"prefix"`
	Key      string        `json:"key"`
	TTL      time.Duration `json:"ttl"`
	Register string        `json:"register"`
	Careless bool          `json:"careless"` // does not check the lease between operations
	Hold     int           `json:"hold"`     // >0: keep each lease through this many renew intervals
	Workload string        `json:"workload"` // "" (WorkloadRegister), WorkloadReadWrite, WorkloadTransfer
	Reader   bool          `json:"reader"`   // read-write: a reader (AcquireShared, reads only)
	Key2     string        `json:"key2"`     // transfer: the second key
	Stats    time.Duration `json:"stats"`    // >0: report runtime.NumGoroutine at this interval
}

// record is one line of a worker's output: an operation or a notice.
type record struct {
	W     int    `json:"w"`
	PID   int    `json:"pid"`
	Op    string `json:"op"` // acquire, read, write, release, lost, ready
	Call  int64  `json:"call"`
	Ret   int64  `json:"ret"` // 0: outcome unknown
	Fence uint64 `json:"fence,omitempty"`
	Value int64  `json:"value,omitempty"`
	// Transfer workload: the second key's fence and register value (Fence
	// and Value are the first key's).
	Fence2 uint64 `json:"fence2,omitempty"`
	Value2 int64  `json:"value2,omitempty"`
	// Shared marks a reader's acquisition and operations (read-write).
	Shared bool `json:"shared,omitempty"`
	// LostAtOnce marks an acquisition returned with a lease already lost
	// or past its local deadline.
	LostAtOnce bool   `json:"lost_at_once,omitempty"`
	OK         bool   `json:"ok"`
	Err        string `json:"err,omitempty"`
	// Pending marks the announcement of a register operation before it is
	// sent: if the worker dies before reporting the outcome, the harness
	// still knows the operation may have happened.
	Pending bool `json:"pending,omitempty"`
}

// MaybeWorker runs the worker loop and exits if this process was started as
// a verify worker; otherwise it returns at once. Call it first in main (or
// TestMain) of every binary that calls Run.
func MaybeWorker() {
	spec := os.Getenv(workerEnv)
	if spec == "" {
		return
	}
	var cfg workerConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "verify worker: bad %s: %v\n", workerEnv, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := runWorker(ctx, cfg); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "verify worker %d: %v\n", cfg.ID, err)
		os.Exit(1)
	}
	os.Exit(0)
}

type emitter struct {
	mu  sync.Mutex
	enc *json.Encoder
	id  int
}

func (e *emitter) emit(r record) {
	r.W, r.PID = e.id, os.Getpid()
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(r)
}

func now() int64 { return time.Now().UnixNano() }

func runWorker(ctx context.Context, cfg workerConfig) error {
	out := &emitter{enc: json.NewEncoder(os.Stdout), id: cfg.ID}
	store, err := leaseurl.Open(ctx, cfg.Store, leaseurl.WithDefault("prefix", cfg.Prefix),
		leaseurl.WithDefault("namespace", cfg.Prefix))
	if err != nil {
		return err
	}
	defer store.Close()
	client, err := lease.New(store, lease.WithTTL(cfg.TTL), lease.WithHolder(fmt.Sprintf("verify-worker-%d:%d", cfg.ID, os.Getpid())))
	if err != nil {
		return err
	}
	defer client.Close()
	if cfg.Stats > 0 {
		go reportStats(ctx, out, cfg.Stats)
	}
	if cfg.Workload == WorkloadTransfer {
		pair, err := openPairRegister(ctx, cfg.Register)
		if err != nil {
			return err
		}
		defer pair.Close()
		out.emit(record{Op: "ready", Call: now(), Ret: now(), OK: true})
		transferLoop(ctx, cfg, out, client, pair)
		return nil
	}
	reg, err := openRegister(ctx, cfg.Register)
	if err != nil {
		return err
	}
	defer reg.Close()
	out.emit(record{Op: "ready", Call: now(), Ret: now(), OK: true})
	renew := cfg.TTL / 3
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 10*cfg.TTL)
		call := now()
		acquire := client.Acquire
		if cfg.Reader {
			acquire = client.AcquireShared
		}
		l, err := acquire(actx, cfg.Key)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(os.Stderr, "acquire after %v: %v\n", time.Duration(now()-call).Round(time.Millisecond), err)
			time.Sleep(cfg.TTL / 10)
			continue
		}
		out.emit(record{Op: "acquire", Call: call, Ret: now(), Fence: l.Fence(), OK: true, Shared: cfg.Reader,
			LostAtOnce: l.Err() != nil || l.Remaining() <= 0})
		go func() {
			<-l.Done()
			if errors.Is(l.Err(), lease.ErrLost) {
				out.emit(record{Op: "lost", Call: now(), Ret: now(), Fence: l.Fence(), OK: true, Err: l.Err().Error(), Shared: cfg.Reader})
			}
		}()
		// One read and write at once, then one after each of Hold renew
		// intervals, and the release right after the last: a holder paused
		// at any time in its hold (but in an operation) does one more
		// operation with its fence when it resumes.
		for i := 0; i <= cfg.Hold && ctx.Err() == nil; i++ {
			if i > 0 {
				sleep(ctx, renew)
			}
			if !cfg.Careless && l.Err() != nil {
				break
			}
			if !readWrite(ctx, out, reg, l.Fence(), cfg.TTL, cfg.Reader) {
				if !cfg.Careless {
					break
				}
			}
		}
		rctx, rcancel := context.WithTimeout(context.Background(), cfg.TTL)
		call = now()
		err = l.Release(rctx)
		rcancel()
		out.emit(record{Op: "release", Call: call, Ret: now(), Fence: l.Fence(), OK: err == nil, Err: errString(err), Shared: cfg.Reader})
	}
	return nil
}

// readWrite does one fenced read and, if accepted and not readOnly, one
// fenced write of value+1. It reports whether both were accepted.
func readWrite(ctx context.Context, out *emitter, reg register, fence uint64, ttl time.Duration, readOnly bool) bool {
	octx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	call := now()
	out.emit(record{Op: "read", Call: call, Fence: fence, Pending: true, Shared: readOnly})
	v, ok, err := reg.Read(octx, fence)
	r := record{Op: "read", Call: call, Ret: now(), Fence: fence, Value: v, OK: ok, Err: errString(err), Shared: readOnly}
	if err != nil {
		r.Ret = 0 // unknown: it may have been applied
	}
	out.emit(r)
	if !ok || err != nil || readOnly {
		return ok && err == nil
	}
	call = now()
	out.emit(record{Op: "write", Call: call, Fence: fence, Value: v + 1, Pending: true})
	ok, err = reg.Write(octx, fence, v+1)
	r = record{Op: "write", Call: call, Ret: now(), Fence: fence, Value: v + 1, OK: ok, Err: errString(err)}
	if err != nil {
		r.Ret = 0
	}
	out.emit(r)
	return ok && err == nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
