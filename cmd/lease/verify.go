// lease verify: the fault-injection harness (package verify) against a
// store, bounded and safe to point at a staging deployment.

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leaseurl"
	"github.com/leasekit/lease/verify"
)

// verifyFaults maps the --faults names to the harness's fault kinds.
var verifyFaults = map[string]string{
	"kill":    verify.FaultKill,
	"stop":    verify.FaultStop,
	"latency": verify.FaultLatency,
	"cut":     verify.FaultCut,
}

func verifyCommand(args []string, stdout, stderr io.Writer) int {
	var c common
	var cfg verify.Config
	var faults, register, workload string
	var asJSON bool
	fs := newFlagSet("verify", "[flags]", stderr)
	c.register(fs)
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long to inject faults (at most 24h)")
	fs.DurationVar(&cfg.TTL, "ttl", time.Second, "lease TTL of the workers (10ms to 1m; etcd needs at least 2s)")
	fs.IntVar(&cfg.Workers, "workers", 4, "worker processes (1 to 64; --workload read-write: 6 unless given)")
	fs.IntVar(&cfg.Hold, "hold", 3, "renew intervals half the workers hold each lease for (0: release at once; at most 1000)")
	fs.StringVar(&faults, "faults", "kill,stop,latency,cut", "faults to inject, comma-separated: kill, stop, latency, cut (empty: none)")
	fs.StringVar(&register, "register", "", "PostgreSQL URL for the fenced register rows (default: a local file)")
	fs.StringVar(&workload, "workload", verify.WorkloadRegister, "what the workers do: register (acquire, read, write), read-write (readers and writers on one key), transfer (two keys all or nothing, transfers between two registers)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return fail(stderr, "verify", exitUsage, "unexpected arguments %q", fs.Args())
	}
	if err := firstErr(
		checkDuration("duration", cfg.Duration, time.Millisecond, 24*time.Hour),
		checkDuration("ttl", cfg.TTL, lease.MinTTL, time.Minute),
		checkCount("workers", cfg.Workers, 1, 64),
		checkCount("hold", cfg.Hold, 0, 1000),
	); err != nil {
		return fail(stderr, "verify", exitUsage, "%v", err)
	}
	switch workload {
	case verify.WorkloadRegister, verify.WorkloadReadWrite, verify.WorkloadTransfer:
		cfg.Workload = workload
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "workers" })
		if workload == verify.WorkloadReadWrite && !given {
			cfg.Workers = 6 // 4 readers, 2 writers
		}
	default:
		return fail(stderr, "verify", exitUsage, "--workload: unknown workload %q (want register, read-write, transfer)", workload)
	}
	cfg.Faults = []string{}
	for _, f := range strings.Split(faults, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		k, ok := verifyFaults[f]
		if !ok {
			return fail(stderr, "verify", exitUsage, "--faults: unknown fault %q (want kill, stop, latency, cut)", f)
		}
		cfg.Faults = append(cfg.Faults, k)
	}
	log, err := c.logger(stderr)
	if err != nil {
		return fail(stderr, "verify", exitUsage, "%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Open and reach the store once first: a bad URL or an unreachable
	// store is not a violation.
	s, safe, code, err := c.openStore(ctx, log)
	if err != nil {
		return fail(stderr, "verify", code, "%v", err) // Open's error names the store
	}
	const probe = "leasekit-verify-probe"
	pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
	_, err = s.Inspect(pctx, probe)
	pcancel()
	shared := s.Caps().Shared
	_ = s.Close()
	if err != nil {
		return fail(stderr, "verify", exitUnavailable, "reach store %s: %s", safe, redactErr(stripOp(err, "inspect", probe), c.storeURL()))
	}
	if cfg.Workload == verify.WorkloadReadWrite && !shared {
		return fail(stderr, "verify", exitUsage, "--workload read-write: store %s does not keep shared holds (read-write leases)", safe)
	}
	cfg.Store = c.storeURL()
	exe, err := os.Executable()
	if err != nil {
		return fail(stderr, "verify", exitSoftware, "%v", err)
	}
	cfg.Command = []string{exe, "verify-worker"}
	cfg.Log = func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
	if register != "" {
		spec, cleanup, err := verify.PostgresRegister(ctx, register, "leasekit_verify_register", fmt.Sprintf("run-%d-%d", os.Getpid(), time.Now().UnixNano()))
		if err != nil {
			return fail(stderr, "verify", exitUnavailable, "register: %s", redactErr(err, register))
		}
		defer func() { _ = cleanup(context.Background()) }()
		cfg.Register = spec
	}
	log.Info("verify: starting", "store", safe, "workload", cfg.Workload, "duration", cfg.Duration, "ttl", cfg.TTL, "workers", cfg.Workers)
	rep, err := verify.Run(ctx, cfg)
	if err != nil {
		return fail(stderr, "verify", exitSoftware, "%v", err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		fmt.Fprint(stdout, rep)
	}
	if !rep.OK() {
		return exitFailed
	}
	return exitOK
}

// verifyWorkerCommand is the hidden worker process of lease verify.
func verifyWorkerCommand(stderr io.Writer) int {
	// The worker's stderr ends up in the report: not go-redis's retries.
	routeRedisLog(slog.New(slog.DiscardHandler), func(s string) string { return s })
	verify.MaybeWorker() // exits when started by lease verify
	return fail(stderr, "verify-worker", exitUsage, "internal command of lease verify")
}

// redactErr removes the secrets of rawURL, and rawURL itself, from err's
// text.
func redactErr(err error, rawURL string) string {
	return strings.ReplaceAll(leaseurl.RedactText(err.Error(), rawURL), rawURL, leaseurl.Redact(rawURL))
}
