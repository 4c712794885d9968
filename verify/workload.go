// The read-write and transfer workloads: readers beside writers on one key,
// and transfers between two registers under two keys held all or nothing.

package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leaseurl"
)

// Workloads: what the workers do (Config.Workload).
const (
	// WorkloadRegister: every worker acquires the key exclusively, reads
	// the fenced register and writes it (the default).
	WorkloadRegister = "register"
	// WorkloadReadWrite: readers (AcquireShared, fenced reads only) beside
	// writers (Acquire, fenced read and write) on one key and register.
	// Every third worker is a writer.
	WorkloadReadWrite = "read-write"
	// WorkloadTransfer: every worker acquires two keys with AcquireAll (in
	// a random order), reads both registers with their fences and moves an
	// amount from one to the other in one atomic fenced write of both; the
	// sum of the two never changes.
	WorkloadTransfer = "transfer"
)

// transferInitial is each transfer register's value before the first
// transfer: the sum of the two is always 2*transferInitial.
const transferInitial = 1000

// transferLoop is a transfer worker's loop: AcquireAll both keys, then a
// fenced read of both registers and a fenced transfer, at once and after
// each of Hold renew intervals, then release.
func transferLoop(ctx context.Context, cfg workerConfig, out *emitter, client *lease.Client, pair pairRegister) {
	renew := cfg.TTL / 3
	for ctx.Err() == nil {
		keys := []string{cfg.Key, cfg.Key2}
		if rand.IntN(2) == 1 {
			keys[0], keys[1] = keys[1], keys[0]
		}
		actx, cancel := context.WithTimeout(ctx, 10*cfg.TTL)
		call := now()
		m, err := client.AcquireAll(actx, keys...)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(os.Stderr, "acquire all after %v: %v\n", time.Duration(now()-call).Round(time.Millisecond), err)
			time.Sleep(cfg.TTL / 10)
			continue
		}
		fa, fb := m.Fence(cfg.Key), m.Fence(cfg.Key2)
		lost := m.Err() != nil
		for _, l := range m.Leases() {
			lost = lost || l.Remaining() <= 0
		}
		out.emit(record{Op: "acquire", Call: call, Ret: now(), Fence: fa, Fence2: fb, OK: true, LostAtOnce: lost})
		go func() {
			<-m.Context().Done()
			if err := m.Err(); errors.Is(err, lease.ErrLost) {
				out.emit(record{Op: "lost", Call: now(), Ret: now(), Fence: fa, Fence2: fb, OK: true, Err: err.Error()})
			}
		}()
		for i := 0; i <= cfg.Hold && ctx.Err() == nil; i++ {
			if i > 0 {
				sleep(ctx, renew)
			}
			if !cfg.Careless && m.Err() != nil {
				break
			}
			if !transfer(ctx, out, pair, fa, fb, cfg.TTL) && !cfg.Careless {
				break
			}
		}
		rctx, rcancel := context.WithTimeout(context.Background(), cfg.TTL)
		call = now()
		err = m.Release(rctx)
		rcancel()
		out.emit(record{Op: "release", Call: call, Ret: now(), Fence: fa, Fence2: fb, OK: err == nil, Err: errString(err)})
	}
}

// transfer reads both registers with their fences and, if accepted, moves
// a random amount (1 to 10, either way) between them in one fenced write.
// It reports whether both were accepted.
func transfer(ctx context.Context, out *emitter, pair pairRegister, fa, fb uint64, ttl time.Duration) bool {
	octx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	call := now()
	out.emit(record{Op: "read", Call: call, Fence: fa, Fence2: fb, Pending: true})
	va, vb, ok, err := pair.Read(octx, fa, fb)
	r := record{Op: "read", Call: call, Ret: now(), Fence: fa, Fence2: fb, Value: va, Value2: vb, OK: ok, Err: errString(err)}
	if err != nil {
		r.Ret = 0
	}
	out.emit(r)
	if !ok || err != nil {
		return false
	}
	amount := rand.Int64N(10) + 1
	if rand.IntN(2) == 0 {
		amount = -amount
	}
	na, nb := va-amount, vb+amount
	call = now()
	out.emit(record{Op: "write", Call: call, Fence: fa, Fence2: fb, Value: na, Value2: nb, Pending: true})
	ok, err = pair.Write(octx, fa, fb, na, nb)
	r = record{Op: "write", Call: call, Ret: now(), Fence: fa, Fence2: fb, Value: na, Value2: nb, OK: ok, Err: errString(err)}
	if err != nil {
		r.Ret = 0
	}
	out.emit(r)
	return ok && err == nil
}

// checkShared refuses a read-write run on a store that does not keep shared
// holds, before any worker starts.
func checkShared(ctx context.Context, cfg Config) error {
	s, err := leaseurl.Open(ctx, cfg.Store, leaseurl.WithDefault("prefix", cfg.Prefix), leaseurl.WithDefault("namespace", cfg.Prefix))
	if err != nil {
		return err
	}
	defer s.Close()
	if !s.Caps().Shared {
		return fmt.Errorf("verify: workload %s: store %s does not keep shared holds: %w", WorkloadReadWrite, redact(cfg.Store), errors.ErrUnsupported)
	}
	return nil
}

// finalSum reads both transfer registers after the run: their sum must be
// the initial one.
func (r *runner) finalSum(ctx context.Context, rep *Report) {
	pair, err := openPairRegister(ctx, r.cfg.Register)
	if err != nil {
		rep.Violations = append(rep.Violations, fmt.Sprintf("the final state could not be read: %v", err))
		return
	}
	defer pair.Close()
	va, vb, err := pair.Peek(ctx)
	if err != nil {
		rep.Violations = append(rep.Violations, fmt.Sprintf("the final state could not be read: %v", err))
		return
	}
	rep.FinalSum = va + vb
	if rep.FinalSum != 2*transferInitial {
		rep.SumViolations++
		rep.Violations = append(rep.Violations, fmt.Sprintf("the registers' final sum is %d (%d + %d), want %d", rep.FinalSum, va, vb, 2*transferInitial))
	}
}
