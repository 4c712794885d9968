// lease run: run a command while holding a lease, and stop it if the lease
// is lost.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leaseprom"
)

type runFlags struct {
	common
	key         string   // the first --key
	keys        []string // every --key
	ttl         time.Duration
	noWait      bool
	shared      bool
	slots       int // -n: a semaphore of this many slots (0: none)
	timeout     time.Duration
	grace       time.Duration
	holder      string
	metricsAddr string
	keyLabel    bool
	passStore   bool
}

// maxSlots bounds lease run -n: a semaphore's waiter looks at every slot.
const maxSlots = 1000

// forwarded are the signals lease run passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func newRunCmd(stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] KEY [KEY...] -- CMD [ARGS...]",
		Short: "Run CMD while holding a lease",
		Long: `Run CMD while holding the lease KEY: wait for it (unless --no-wait, or up to
--timeout), run CMD with LEASE_KEY, LEASE_TOKEN, LEASE_FENCE, LEASE_HOLDER and
LEASE_TTL_MS in its environment, renew the lease while CMD runs, and release
it when CMD and what it started have ended. If the lease is lost, CMD gets
SIGTERM, then SIGKILL after --grace, and lease run exits 76.

Several KEYs are held all or none; CMD then gets LEASE_KEY_COUNT and
LEASE_KEY_i, LEASE_TOKEN_i, LEASE_FENCE_i (i from 1, in key order).
-n N holds one of N slots of the semaphore KEY: CMD gets the slot's key in
LEASE_KEY and KEY in LEASE_SEMAPHORE. --shared takes a reader's lease.`,
		Example: `  lease run job:invoice -- ./generate-invoices --month 2026-11
  lease run --no-wait -t 30s job:invoice -- ./generate-invoices
  lease run -n 4 pool:render -- ./render scene.blend
  lease run --shared config -- ./read-config
  lease run account:1 account:2 -- ./transfer 1 2 100`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			// After "--" comes CMD. (Completion parses the line twice,
			// once with a "--" appended, which ArgsLenAtDash keeps.)
			if slices.Contains(os.Args[1:len(os.Args)-1], "--") {
				return nil, cobra.ShellCompDirectiveDefault // files
			}
			return completeKeys(cmd, &f.common, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return exit(f.start(cmd, args, stderr))
		},
	}
	fs := cmd.Flags()
	f.common.flags(fs)
	fs.StringArrayVar(&f.keys, "key", nil, "lease key (deprecated: give KEY as an argument)")
	_ = fs.MarkHidden("key")
	fs.DurationVarP(&f.ttl, "ttl", "t", lease.DefaultTTL, "lease TTL: how long the lease outlives a crashed lease run (10ms to 24h)")
	fs.IntVarP(&f.slots, "slots", "n", 0, "hold one of N slots of the semaphore KEY (0: an ordinary lease; at most 1000)")
	fs.BoolVar(&f.noWait, "no-wait", false, "exit 75 at once if the lease is held")
	fs.BoolVar(&f.shared, "shared", false, "take a shared (reader's) lease: many readers hold the key together, never beside a writer")
	fs.DurationVar(&f.timeout, "timeout", 0, "wait at most this long for the lease, then exit 75 (0: no limit)")
	fs.DurationVar(&f.grace, "grace", 5*time.Second, "after a loss, time between SIGTERM and SIGKILL to the command (0: SIGKILL at once; at most 24h)")
	fs.StringVar(&f.holder, "holder", "", "holder identity shown to others (default hostname:pid)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (e.g. :9090) at /metrics, and the debug page at /debug/leases")
	fs.BoolVar(&f.keyLabel, "metrics-key-label", false, "label metrics with the lease key")
	fs.BoolVar(&f.passStore, "pass-store", false, "keep $"+storeEnv+" (which may hold a password) in the command's environment")
	skipEnv(fs, "key", "holder", "shared")
	withEnv(fs)
	return cmd
}

// start takes KEYs and CMD from args (KEYs before "--"; with the old
// --key, CMD may come without "--"), checks the flags and runs.
func (f *runFlags) start(cmd *cobra.Command, args []string, stderr io.Writer) int {
	var argv []string
	switch dash := cmd.ArgsLenAtDash(); {
	case dash >= 0:
		f.keys = append(args[:dash:dash], f.keys...)
		argv = args[dash:]
	case len(f.keys) > 0:
		argv = args
	case len(args) > 0:
		return fail(stderr, "run", exitUsage, "put -- between KEY and the command (lease run [flags] KEY -- CMD [ARGS...])")
	}
	if len(f.keys) > 0 {
		f.key = f.keys[0]
	}
	switch {
	case f.key == "":
		return fail(stderr, "run", exitUsage, "KEY is required (lease run [flags] KEY -- CMD [ARGS...])")
	case len(argv) == 0:
		return fail(stderr, "run", exitUsage, "no command given (lease run [flags] KEY -- CMD [ARGS...])")
	case f.shared && len(f.keys) > 1:
		return fail(stderr, "run", exitUsage, "--shared takes one KEY: several keys are held exclusively, all or none")
	case f.slots != 0 && (f.shared || len(f.keys) > 1):
		return fail(stderr, "run", exitUsage, "--slots takes one KEY and no --shared")
	}
	if err := f.check(); err != nil {
		return fail(stderr, "run", exitUsage, "%v", err)
	}
	log, err := f.logger(stderr)
	if err != nil {
		return fail(stderr, "run", exitUsage, "%v", err)
	}
	return f.run(argv, log, stderr)
}

// check validates the duration flags: each either has a range or, for
// --timeout and --grace, a documented meaning of 0.
func (f *runFlags) check() error {
	return firstErr(
		checkDuration("ttl", f.ttl, lease.MinTTL, maxLeaseTTL),
		checkDuration("timeout", f.timeout, 0, 0),
		checkDuration("grace", f.grace, 0, maxLeaseTTL),
		checkCount("slots", f.slots, 0, maxSlots),
	)
}

func (f *runFlags) run(argv []string, log *slog.Logger, stderr io.Writer) int {
	// Signals are caught from the start: while waiting they cancel the wait,
	// once the command runs they are forwarded to it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var caught os.Signal
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case s := <-sigs:
			caught = s
			cancel(fmt.Errorf("got %v", s))
		case <-stopWatch:
		}
	}()

	store, safeURL, code, err := f.openStore(ctx, log)
	if err != nil {
		return fail(stderr, "run", code, "%v", err)
	}
	defer store.Close()
	libLog := log // the library names the key of each line itself
	if len(f.keys) > 1 {
		log = log.With("keys", f.keys)
	} else {
		log = log.With("key", f.key)
	}

	metrics := leaseprom.New(metricsOpts(f.keyLabel)...)
	opts := []lease.Option{lease.WithTTL(f.ttl), lease.WithObserver(metrics), lease.WithLogger(libLog)}
	if f.holder != "" {
		opts = append(opts, lease.WithHolder(f.holder))
	}
	client, err := lease.New(store, opts...)
	if err != nil {
		return fail(stderr, "run", exitUsage, "%v", err)
	}
	defer client.Close()
	if f.metricsAddr != "" {
		stop, err := serveMetrics(f.metricsAddr, metrics, client, log)
		if err != nil {
			return fail(stderr, "run", exitSoftware, "%v", err)
		}
		defer stop()
	}

	var h holding
	var env []string
	if len(f.keys) > 1 {
		var m *lease.Multi
		if m, code = f.acquireAll(ctx, client, safeURL, stderr); m != nil {
			h, env = m, childEnv(m.Leases(), f.passStore)
		}
	} else {
		var l *lease.Lease
		if l, code = f.acquire(ctx, client, safeURL, log, stderr); l != nil {
			h, env = l, childEnv([]*lease.Lease{l}, f.passStore)
			if f.slots > 0 {
				env = append(env, "LEASE_SEMAPHORE="+f.key)
			}
		}
	}
	if h == nil {
		if caught != nil {
			return signalExit(caught)
		}
		return code
	}
	close(stopWatch)
	<-watchDone
	if caught != nil { // a signal came just as the lease was acquired
		_ = h.Release(context.Background())
		return signalExit(caught)
	}
	log.Info("lease acquired, starting the command", "fences", fences(env), "holder", client.Holder(), "ttl", f.ttl, "command", argv[0])
	code = f.supervise(argv, h, env, sigs, log, stderr)
	return finish(h, f.ttl, code, log)
}

// holding is what lease run holds while the command runs: one lease, or a
// *lease.Multi for several --key.
type holding interface {
	Context() context.Context
	Err() error
	Release(ctx context.Context) error
}

// finish releases l once the command has ended with code and returns lease
// run's exit code: exitLost, whatever the command returned, unless the lease
// was held for the whole run. The loss may have been noticed too late for
// supervise (the command exited first), or not at all: the release then
// finds that the store no longer holds our token (it expired, or the store
// lost it and someone else acquired it).
func finish(l holding, ttl time.Duration, code int, log *slog.Logger) int {
	if err := l.Err(); errors.Is(err, lease.ErrLost) {
		if code != exitLost {
			log.Error("the lease was lost while the command ran", "err", err, "command_exit", code, "exit_code", exitLost)
		}
		return exitLost
	}
	// The release may take as long as the lease lasts: after that the store
	// frees the key anyway.
	rctx, rcancel := context.WithTimeout(context.Background(), ttl)
	defer rcancel()
	err := l.Release(rctx)
	switch {
	case err == nil:
		log.Info("lease released", "exit_code", code)
		return code
	case errors.Is(err, lease.ErrNotHeld), errors.Is(err, lease.ErrLost):
		log.Error("the lease was lost while the command ran: the store no longer held it at release", "err", err, "command_exit", code, "exit_code", exitLost)
		return exitLost
	}
	log.Warn("releasing the lease failed; it expires after its TTL", "err", err)
	return code
}

// probeTimeout bounds lease run's first look at the store and first attempt.
const probeTimeout = 15 * time.Second

// waitCtx bounds the wait for the lease by --timeout.
func (f *runFlags) waitCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if f.timeout > 0 && !f.noWait {
		return context.WithTimeout(ctx, f.timeout)
	}
	return context.WithCancel(ctx)
}

// notAcquired reports err, the failure to acquire key within wctx (ctx
// ended: a signal), and returns lease run's exit code.
func (f *runFlags) notAcquired(ctx, wctx context.Context, key string, err error, safeURL string, stderr io.Writer) int {
	var full *lease.QueueFullError
	switch {
	case errors.Is(err, lease.ErrInvalid):
		return fail(stderr, "run", exitUsage, "%v", err)
	case errors.As(err, &full):
		return fail(stderr, "run", exitNotAcquired, "lease %q not acquired: its queue of waiters is full (max_waiters=%d); try again later", key, full.Max)
	case ctx.Err() != nil: // a signal: the caller exits 128+N
		return exitNotAcquired
	case wctx.Err() != nil:
		return fail(stderr, "run", exitNotAcquired, "lease %q not acquired within --timeout %v", key, f.timeout)
	}
	// The acquisition is what the user asked for, whichever call failed.
	err = stripOp(stripOp(err, "inspect", key), "acquire", key)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v: %w", probeTimeout, err)
	}
	return fail(stderr, "run", exitUnavailable, "acquire %q: store %s: %v", key, safeURL, err)
}

// acquire takes the lease as the flags ask; on failure it returns a nil
// lease and the exit code.
func (f *runFlags) acquire(ctx context.Context, c *lease.Client, safeURL string, log *slog.Logger, stderr io.Writer) (*lease.Lease, int) {
	wctx, cancel := f.waitCtx(ctx)
	defer cancel()
	notAcquired := func(err error) (*lease.Lease, int) {
		return nil, f.notAcquired(ctx, wctx, f.key, err, safeURL, stderr)
	}
	// A look first, read-only: a wrong address or password fails at once
	// instead of being retried for as long as the wait lasts, and without a
	// write whose outcome is unknown (which the Client would then clean up).
	tctx, tcancel := context.WithTimeout(wctx, probeTimeout)
	defer tcancel()
	if _, err := c.Inspect(tctx, f.key); err != nil {
		return notAcquired(err)
	}
	// Then one attempt, to tell who holds the lease before waiting for it.
	try, wait := c.TryAcquire, c.Acquire
	switch {
	case f.shared:
		try, wait = c.TryAcquireShared, c.AcquireShared
	case f.slots > 0:
		try = func(ctx context.Context, key string, opts ...lease.AcquireOption) (*lease.Lease, error) {
			return c.TrySemaphore(ctx, key, f.slots, opts...)
		}
		wait = func(ctx context.Context, key string, opts ...lease.AcquireOption) (*lease.Lease, error) {
			return c.AcquireSemaphore(ctx, key, f.slots, opts...)
		}
	}
	l, err := try(tctx, f.key)
	var held *lease.HeldError
	switch {
	case err == nil:
		return l, exitOK
	case !errors.As(err, &held):
		return notAcquired(err)
	case f.noWait:
		// The refusal as the store reports it, which every store words
		// the same way.
		return nil, fail(stderr, "run", exitNotAcquired, "not acquired (--no-wait): %v", held)
	}
	log.Info("lease held, waiting", "holder", held.Holder, "holder_fence", held.Fence, "remaining", held.Remaining.Round(time.Millisecond))
	l, err = wait(wctx, f.key)
	if err != nil {
		return notAcquired(err)
	}
	return l, exitOK
}

// acquireAll takes every --key or none (Client.AcquireAll), after a
// read-only look at each; with --no-wait, one try of each, in key order.
func (f *runFlags) acquireAll(ctx context.Context, c *lease.Client, safeURL string, stderr io.Writer) (*lease.Multi, int) {
	wctx, cancel := f.waitCtx(ctx)
	defer cancel()
	tctx, tcancel := context.WithTimeout(wctx, probeTimeout)
	defer tcancel()
	for _, k := range f.keys {
		if _, err := c.Inspect(tctx, k); err != nil {
			return nil, f.notAcquired(ctx, wctx, k, err, safeURL, stderr)
		}
	}
	acquire := c.AcquireAll
	if f.noWait {
		acquire = c.TryAcquireAll
	}
	m, err := acquire(wctx, f.keys...)
	var held *lease.HeldError
	switch {
	case err == nil:
		return m, exitOK
	case f.noWait && errors.As(err, &held):
		return nil, fail(stderr, "run", exitNotAcquired, "not acquired (--no-wait): %v", held)
	}
	return nil, f.notAcquired(ctx, wctx, strings.Join(f.keys, ","), err, safeURL, stderr)
}

// stripOp removes from err the layers that only say which operation on key
// failed ("lease: inspect \"k\": ", "redislease: inspect \"k\": "), so that
// lease run can name the operation the user asked for instead.
func stripOp(err error, op, key string) error {
	label := fmt.Sprintf("%s %q: ", op, key)
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		prefix, ok := strings.CutSuffix(err.Error(), u.Error())
		if !ok || !strings.HasSuffix(prefix, label) {
			return err
		}
		err = u
	}
}

// childEnv returns the environment of the command: ours plus the leases',
// without $LEASE_STORE unless passStore: the store URL may hold a password
// the command has no need for. One lease sets LEASE_KEY, LEASE_TOKEN and
// LEASE_FENCE; several set LEASE_KEY_COUNT and those three suffixed _1.._n,
// in key order. A shared lease sets LEASE_SHARED=1.
func childEnv(ls []*lease.Lease, passStore bool) []string {
	env := os.Environ()
	if !passStore {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, storeEnv+"=") })
	}
	for i, l := range ls {
		sfx := ""
		if len(ls) > 1 {
			sfx = "_" + strconv.Itoa(i+1)
		}
		env = append(env, "LEASE_KEY"+sfx+"="+l.Key(), "LEASE_TOKEN"+sfx+"="+l.Token(), "LEASE_FENCE"+sfx+"="+strconv.FormatUint(l.Fence(), 10))
	}
	if len(ls) > 1 {
		env = append(env, "LEASE_KEY_COUNT="+strconv.Itoa(len(ls)))
	}
	if ls[0].Shared() {
		env = append(env, "LEASE_SHARED=1")
	}
	return append(env, "LEASE_HOLDER="+ls[0].Holder(), "LEASE_TTL_MS="+strconv.FormatInt(ls[0].TTL().Milliseconds(), 10))
}

// fences returns the LEASE_FENCE variables of env, for the log.
func fences(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return !strings.HasPrefix(kv, "LEASE_FENCE") })
}

// signalExit is the conventional exit code of a process ended by s.
func signalExit(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return exitFailed
}

func metricsOpts(keyLabel bool) []leaseprom.Option {
	if keyLabel {
		return []leaseprom.Option{leaseprom.WithKeyLabel()}
	}
	return nil
}
