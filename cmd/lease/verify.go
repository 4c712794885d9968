// lease verify: the fault-injection harness (package verify) against a
// store, bounded and safe to point at a staging deployment.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

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
	"break":   verify.FaultBreak,
}

func newVerifyCmd(stdout, stderr io.Writer) *cobra.Command {
	var v verifyFlags
	cmd := &cobra.Command{
		Use:   "verify [flags]",
		Short: "Prove the store safe under faults (kill -9, pauses, cuts)",
		Long: `Run the fault-injection harness against a store, bounded in time and under its
own key prefix: worker processes acquire, read and write a fenced register
with their fence while a nemesis kills, stops, delays and cuts them; the
history is checked for linearizability. Exits 0 when clean, 1 on any
violation. See docs/RELIABILITY.md.`,
		Example: `  lease verify -s redis://localhost:6379 --duration 1m
  lease verify -s postgres://lease@db/app --workload transfer --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v.workersGiven = cmd.Flags().Changed("workers")
			return exit(verifyCommand(&v, stdout, stderr))
		},
	}
	fs := cmd.Flags()
	v.c.flags(fs)
	fs.DurationVar(&v.cfg.Duration, "duration", 30*time.Second, "how long to inject faults (at most 24h)")
	fs.DurationVarP(&v.cfg.TTL, "ttl", "t", time.Second, "lease TTL of the workers (10ms to 1m; etcd needs at least 2s)")
	fs.IntVar(&v.cfg.Workers, "workers", 4, "worker processes (1 to 64; --workload read-write: 6 unless given)")
	fs.IntVar(&v.cfg.Hold, "hold", 3, "renew intervals half the workers hold each lease for (0: release at once; at most 1000)")
	fs.StringVar(&v.faults, "faults", "kill,stop,latency,cut", "faults to inject, comma-separated: kill, stop, latency, cut, break (empty: none)")
	fs.StringVar(&v.register, "register", "", "PostgreSQL URL for the fenced register rows (default: a local file)")
	fs.StringVar(&v.workload, "workload", verify.WorkloadRegister, "what the workers do: register (acquire, read, write), read-write (readers and writers on one key), transfer (two keys all or nothing, transfers between two registers)")
	fs.BoolVar(&v.asJSON, "json", false, "print the report as JSON")
	withEnv(fs)
	return cmd
}

// verifyFlags are the flags of lease verify.
type verifyFlags struct {
	c                          common
	cfg                        verify.Config
	faults, register, workload string
	asJSON, workersGiven       bool
}

func verifyCommand(v *verifyFlags, stdout, stderr io.Writer) int {
	c, cfg, faults, register, workload, asJSON := &v.c, &v.cfg, v.faults, v.register, v.workload, v.asJSON
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
		if workload == verify.WorkloadReadWrite && !v.workersGiven {
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
			return fail(stderr, "verify", exitUsage, "--faults: unknown fault %q (want kill, stop, latency, cut, break)", f)
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
	rep, err := verify.Run(ctx, *cfg)
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
