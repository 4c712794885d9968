// Run: the worker processes, the nemesis and the report.

package verify

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

// Fault kinds the nemesis injects.
const (
	FaultKill    = "kill -9"
	FaultStop    = "SIGSTOP 1.5xTTL"
	FaultLatency = "latency"
	FaultCut     = "connection cut"
	FaultRestart = "store restart"
	FaultBreak   = "forced release"
)

// Config describes one verification run.
type Config struct {
	// Store is the store URL (see leaseurl). Workers reach TCP stores with a
	// single host through a proxy of the harness, for the latency and cut
	// faults.
	Store string
	// Register is the fenced register: "" for a file in Dir, a spec from
	// PostgresRegister, or "unfenced:PATH" for a file register that accepts
	// every write (the control run that shows what fencing prevents).
	Register string
	// Workload is what the workers do: WorkloadRegister (""), the default;
	// WorkloadReadWrite, readers and writers on one key (the store must
	// keep shared holds, Caps.Shared); or WorkloadTransfer, transfers
	// between two registers under two keys held with AcquireAll.
	Workload string
	// Duration bounds the run (default 30s).
	Duration time.Duration
	// TTL of the workers' leases (default 1s).
	TTL time.Duration
	// Workers is the number of worker processes (default 4; 6 for
	// WorkloadReadWrite: 4 readers, 2 writers).
	Workers int
	// Hold > 0 makes half the workers keep each lease through Hold renew
	// intervals, reading and writing when they acquire and after each
	// interval, and releasing right after the last. (Every second worker is
	// careless: it does not check its lease between operations.)
	Hold int
	// Faults to inject, in turn (default: kill, stop, latency, cut, and
	// restart when Restart is set). An empty non-nil slice injects none.
	Faults []string
	// Restart, if set, restarts the store (FaultRestart).
	Restart func(ctx context.Context) error
	// StepClock, if set, moves the store server's wall clock by d (back
	// when d < 0), for the store clock faults (FaultClockForward, ...).
	StepClock func(ctx context.Context, d time.Duration) error
	// Dir receives the register file and, for a failing history, the
	// porcupine visualization (default: a temporary directory, removed
	// unless the run failed).
	Dir string
	// Prefix isolates the run's keys in the store (default: a random
	// "leasekit-verify-…" prefix); the key is Prefix + "key".
	Prefix string
	// Command is the worker command (default: this executable, which must
	// call MaybeWorker).
	Command []string
	// Log, if set, receives progress lines.
	Log func(format string, args ...any)
	// Net, if set, runs each worker in a network namespace of its own on
	// this network (netns.go), for the network faults (NetFaults); it
	// replaces the proxy (no latency or cut faults).
	Net *Net
	// Sample > 0 samples every worker process's RSS, open file descriptors
	// and goroutines at this interval (Report.Samples) and checks them for
	// growth with DefaultGrowth (Report.Trends; growth is a violation).
	Sample time.Duration
	// Survivors: the nemesis never kills the first Survivors workers (it
	// still pauses them, delays and cuts their connections), so that a long
	// run has processes that live through all of it.
	Survivors int
}

// Report is the outcome of a run.
type Report struct {
	Store              string         // redacted
	Workload           string         // WorkloadRegister, WorkloadReadWrite or WorkloadTransfer
	Duration           time.Duration  // wall time of the run
	TTL                time.Duration  // lease TTL
	Acquisitions       int            // leases granted
	Operations         int            // register reads and writes
	Faults             map[string]int // injected, by kind
	StaleRejected      int            // register operations refused for an old fence
	StaleAccepted      int            // operations with an old fence accepted after a newer fence was: must be 0
	FenceRegressions   int            // acquisitions whose fence was not above every fence granted before they began: must be 0
	Unknown            int            // operations whose outcome was not seen
	StuckLeases        int            // holder deaths not followed by a new holder within TTL + grace: must be 0
	LongestFailover    time.Duration  // longest holder death -> next acquisition
	UnfencedLetThrough int            // operations by a superseded holder, which a register without fencing would accept
	OverlappingHolders int            // (old, new) holder pairs that overlapped in time
	Linearizable       bool           // porcupine's verdict
	// Read-write workload.
	SharedAcquisitions int // readers' acquisitions (AcquireShared)
	SharedEpochs       int // read epochs (fences) granted to two or more readers
	Interleavings      int // (writer, older epoch) pairs where a reader's operation was accepted after the writer's: must be 0
	// Transfer workload.
	Transfers     int      // accepted transfers (atomic writes of both registers)
	SumViolations int      // accepted reads of both registers, and the final state, whose sum was not the initial one: must be 0
	FinalSum      int64    // the registers' sum after the run
	AcquiredLost  int      // acquisitions returned with a lease (of a set: one of its leases) already lost or past its local deadline
	EarlyGrants   int      // forward store clock steps after which a second worker acquired while the first still used its lease
	Visualization string   // path of the HTML visualization of a failing history
	Violations    []string // what went wrong
	WorkerErrors  []string // the last lines the workers wrote to stderr (acquire failures, ...)
	// Config.Sample > 0: the samples and the processes judged for growth.
	Samples []Sample
	Trends  []ProcessTrend
}

// OK reports whether the run found no violation.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// String renders the report for people.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store              %s\n", r.Store)
	if r.Workload != "" && r.Workload != WorkloadRegister {
		fmt.Fprintf(&b, "workload           %s\n", r.Workload)
	}
	fmt.Fprintf(&b, "duration, TTL      %v, %v\n", r.Duration.Round(time.Millisecond), r.TTL)
	fmt.Fprintf(&b, "acquisitions       %d\n", r.Acquisitions)
	switch r.Workload {
	case WorkloadReadWrite:
		fmt.Fprintf(&b, "  of readers       %d (%d read epochs shared by two or more)\n", r.SharedAcquisitions, r.SharedEpochs)
	case WorkloadTransfer:
		fmt.Fprintf(&b, "transfers          %d accepted\n", r.Transfers)
	}
	fmt.Fprintf(&b, "register ops       %d (%d with unknown outcome)\n", r.Operations, r.Unknown)
	var fs []string
	for _, k := range append([]string{FaultKill, FaultStop, FaultLatency, FaultCut, FaultBreak, FaultRestart}, append(NetFaults, clockFaults...)...) {
		if n := r.Faults[k]; n > 0 {
			fs = append(fs, fmt.Sprintf("%s: %d", k, n))
		}
	}
	fmt.Fprintf(&b, "faults             %s\n", strings.Join(fs, ", "))
	fmt.Fprintf(&b, "stale rejected     %d\n", r.StaleRejected)
	fmt.Fprintf(&b, "stale ACCEPTED     %d (must be 0)\n", r.StaleAccepted)
	fmt.Fprintf(&b, "fence regressions  %d (must be 0)\n", r.FenceRegressions)
	switch r.Workload {
	case WorkloadReadWrite:
		fmt.Fprintf(&b, "interleavings      %d (must be 0: a reader's operation accepted after a newer writer's)\n", r.Interleavings)
	case WorkloadTransfer:
		fmt.Fprintf(&b, "sum violations     %d (must be 0; final sum %d, want %d)\n", r.SumViolations, r.FinalSum, 2*transferInitial)
	}
	fmt.Fprintf(&b, "stuck leases       %d (must be 0)\n", r.StuckLeases)
	if r.AcquiredLost > 0 {
		fmt.Fprintf(&b, "acquired lost      %d (returned with a lease already lost or past its local deadline)\n", r.AcquiredLost)
	}
	b.WriteString(r.clockLine())
	fmt.Fprintf(&b, "longest fail-over  %v\n", r.LongestFailover.Round(time.Millisecond))
	fmt.Fprintf(&b, "linearizable       %v\n", r.Linearizable)
	fmt.Fprintf(&b, "without fencing    %d operations of superseded holders would have been let through (%d overlapping holder pairs)\n", r.UnfencedLetThrough, r.OverlappingHolders)
	b.WriteString(r.resourcesString())
	if r.Visualization != "" {
		fmt.Fprintf(&b, "visualization      %s\n", r.Visualization)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION          %s\n", v)
	}
	if len(r.Violations) > 0 {
		for _, e := range r.WorkerErrors {
			fmt.Fprintf(&b, "worker stderr      %s\n", e)
		}
	}
	return b.String()
}

type worker struct {
	cfg  workerConfig
	cmd  *exec.Cmd
	done chan struct{}
}

type runner struct {
	cfg     Config
	wcfgs   []workerConfig
	proxies []*proxy
	hosts   []*Host // with Config.Net: worker i's namespace
	log     func(string, ...any)

	mu       sync.Mutex
	recs     []record
	workers  []*worker
	holder   map[int]uint64        // worker id -> fence it holds (acquired, not released or lost)
	pending  map[pendingKey]record // announced register operations without an outcome yet
	deaths   []death
	steps    []clockStep // forward steps of the store's clock
	stderr   []string
	acquired bool // a worker has acquired the lease
	samples  []Sample
	wg       sync.WaitGroup
}

// Run runs the harness and returns its report. The error is for a run that
// could not be carried out; violations are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Store == "" {
		return nil, errors.New("verify: no store URL")
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 30 * time.Second
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Second
	}
	switch cfg.Workload {
	case "":
		cfg.Workload = WorkloadRegister
	case WorkloadRegister, WorkloadReadWrite, WorkloadTransfer:
	default:
		return nil, fmt.Errorf("verify: unknown workload %q", cfg.Workload)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
		if cfg.Workload == WorkloadReadWrite {
			cfg.Workers = 6
		}
	}
	if cfg.Faults == nil && cfg.Net != nil {
		cfg.Faults = []string{FaultPartition, FaultOneWay, FaultLoss, FaultPartitionHeal}
	}
	if cfg.Faults == nil {
		cfg.Faults = []string{FaultKill, FaultStop, FaultLatency, FaultCut}
		if cfg.Restart != nil {
			cfg.Faults = append(cfg.Faults, FaultRestart)
		}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "leasekit-verify-" + randHex(6) + "-"
	}
	if cfg.Workload == WorkloadReadWrite {
		if err := checkShared(ctx, cfg); err != nil {
			return nil, err
		}
	}
	keep := cfg.Dir != ""
	if !keep {
		d, err := os.MkdirTemp("", "leasekit-verify-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	}
	if len(cfg.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Command = []string{exe}
	}
	if cfg.Register == "" {
		cfg.Register = "file:" + filepath.Join(cfg.Dir, "register")
	}
	r := &runner{cfg: cfg, holder: map[int]uint64{}, pending: map[pendingKey]record{}, log: cfg.Log}
	if r.log == nil {
		r.log = func(string, ...any) {}
	}
	rep, err := r.run(ctx)
	if !keep && (err == nil && rep.OK()) {
		_ = os.RemoveAll(cfg.Dir)
	}
	return rep, err
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// proxied returns store with its host replaced by a new proxy's, or store
// itself (nil proxy) for schemes or URLs the proxy cannot stand in for.
func proxied(store string) (string, *proxy, error) {
	u, err := url.Parse(store)
	if err != nil || u.Host == "" || strings.Contains(u.Host, ",") {
		return store, nil, nil
	}
	switch strings.ToLower(u.Scheme) {
	case "redis", "postgres", "postgresql", "mysql", "etcd", "zk", "nats":
	default:
		return store, nil, nil // file, mem, TLS schemes (the certificate names the real host)
	}
	host := u.Host
	if u.Port() == "" {
		return store, nil, nil
	}
	p, err := newProxy(host)
	if err != nil {
		return "", nil, err
	}
	u.Host = p.Addr()
	return u.String(), p, nil
}

func (r *runner) run(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	start := time.Now()
	netStore := ""
	if cfg.Net != nil {
		var err error
		if netStore, err = r.setupNet(ctx); err != nil {
			return nil, err
		}
	}
	for i := 0; i < cfg.Workers; i++ {
		storeURL, p, err := netStore, (*proxy)(nil), error(nil)
		if cfg.Net == nil {
			storeURL, p, err = proxied(cfg.Store)
		}
		if err != nil {
			return nil, err
		}
		r.proxies = append(r.proxies, p)
		wc := workerConfig{ID: i, Store: storeURL, Prefix: cfg.Prefix, Key: cfg.Prefix + "key", TTL: cfg.TTL,
			Register: cfg.Register, Careless: i%2 == 1, Workload: cfg.Workload, Stats: cfg.Sample}
		switch cfg.Workload {
		case WorkloadReadWrite:
			wc.Reader = i%3 != 0 // workers 0, 3, ... write; the others read
		case WorkloadTransfer:
			wc.Key2 = cfg.Prefix + "key2"
		}
		if cfg.Hold > 0 && (i%4 < 2 || wc.Reader) {
			wc.Hold = cfg.Hold // readers always hold, so that they share
		}
		r.wcfgs = append(r.wcfgs, wc)
	}
	defer func() {
		for _, p := range r.proxies {
			if p != nil {
				p.Close()
			}
		}
	}()
	for i := range r.wcfgs {
		if err := r.spawn(i); err != nil {
			r.stopAll()
			return nil, err
		}
	}
	rep := &Report{Store: redact(cfg.Store), Workload: cfg.Workload, TTL: cfg.TTL, Faults: map[string]int{}}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	r.nemesis(runCtx, rep)
	cancel()
	end := time.Now().UnixNano()
	r.stopAll()
	r.wg.Wait()
	rep.Duration = time.Since(start)

	r.mu.Lock()
	recs := append([]record(nil), r.recs...)
	for _, p := range r.pending {
		recs = append(recs, p) // the worker died (or was stopped) before the outcome: unknown
	}
	deaths := append([]death(nil), r.deaths...)
	steps := append([]clockStep(nil), r.steps...)
	r.mu.Unlock()
	for i := range deaths {
		deaths[i].runEnd = end
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	keys := []string{cfg.Prefix + "key"}
	if cfg.Workload == WorkloadTransfer {
		keys = append(keys, cfg.Prefix+"key2")
	}
	for _, k := range keys {
		if err := cleanup(cctx, cfg.Store, cfg.Prefix, k); err != nil {
			r.log("verify: cleaning up the run's key %s: %v", k, err)
		}
	}
	if cfg.Workload == WorkloadTransfer {
		r.finalSum(cctx, rep)
	}
	ccancel()
	analyse(rep, recs)
	failovers(rep, recs, deaths, cfg.TTL, max(cfg.TTL, 2*time.Second))
	earlyGrants(rep, recs, steps, r.log)
	rep.WorkerErrors = r.stderrTail()
	r.resources(rep)
	if rep.Acquisitions == 0 {
		rep.Violations = append(rep.Violations, "no worker ever acquired the lease")
	}
	if rep.StaleAccepted > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d stale operations were accepted", rep.StaleAccepted))
	}
	m := model.ToModel()
	if cfg.Workload == WorkloadTransfer {
		m = pairModel.ToModel()
	}
	limit := max(time.Minute, cfg.Duration/3) // a long run's history is long: 10 min for 30 min
	res, info := porcupine.CheckOperationsVerbose(m, history(recs, end), limit)
	rep.Linearizable = res == porcupine.Ok
	switch res {
	case porcupine.Illegal:
		if f, err := os.Create(filepath.Join(cfg.Dir, "history.jsonl")); err == nil {
			enc := json.NewEncoder(f)
			for _, rec := range recs {
				_ = enc.Encode(rec)
			}
			_ = f.Close()
		}
		path := filepath.Join(cfg.Dir, "history.html")
		if err := porcupine.VisualizePath(m, info, path); err == nil {
			rep.Visualization = path
		}
		rep.Violations = append(rep.Violations, "the history is not linearizable against the fenced lock/register model")
	case porcupine.Unknown:
		rep.Violations = append(rep.Violations, fmt.Sprintf("porcupine could not decide within %v", limit))
	}
	return rep, nil
}

// spawn starts worker i (again, after a kill).
func (r *runner) spawn(i int) error {
	spec, err := json.Marshal(r.wcfgs[i])
	if err != nil {
		return err
	}
	argv := r.cfg.Command
	if len(r.hosts) > i {
		argv = r.hosts[i].Command(argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("verify: start worker: %w", err)
	}
	w := &worker{cfg: r.wcfgs[i], cmd: cmd, done: make(chan struct{})}
	r.mu.Lock()
	for len(r.workers) <= i {
		r.workers = append(r.workers, nil)
	}
	r.workers[i] = w
	r.mu.Unlock()
	var pipes sync.WaitGroup
	pipes.Add(2)
	r.wg.Add(1)
	go func() {
		defer pipes.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec record
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				continue
			}
			r.observe(rec)
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		defer pipes.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			r.mu.Lock()
			r.stderr = append(r.stderr, sc.Text())
			if len(r.stderr) > 20 {
				r.stderr = r.stderr[1:]
			}
			r.mu.Unlock()
		}
	}()
	go func() {
		defer r.wg.Done()
		pipes.Wait()
		_ = cmd.Wait()
		r.mu.Lock()
		delete(r.holder, i)
		r.mu.Unlock()
		close(w.done)
	}()
	return nil
}

func (r *runner) stderrTail() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.stderr...)
}

// pendingKey identifies an announced register operation.
type pendingKey struct {
	pid  int
	call int64
}

func (r *runner) observe(rec record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Op == "read" || rec.Op == "write" {
		k := pendingKey{rec.PID, rec.Call}
		if rec.Pending {
			rec.Ret, rec.OK = 0, false
			r.pending[k] = rec
			return
		}
		delete(r.pending, k)
	}
	switch rec.Op {
	case "ready":
		return
	case statsOp:
		r.sampled(rec)
		return
	case "acquire":
		r.holder[rec.W] = rec.Fence
		r.acquired = true
	case "release", "lost":
		if r.holder[rec.W] == rec.Fence {
			delete(r.holder, rec.W)
		}
		return
	}
	r.recs = append(r.recs, rec)
}

// currentHolder returns a worker that holds the lease, if any.
func (r *runner) currentHolder(careless bool) (int, uint64, *worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	best, bf := -1, uint64(0)
	for id, f := range r.holder {
		if careless && !r.wcfgs[id].Careless {
			continue
		}
		if f > bf {
			best, bf = id, f
		}
	}
	if best < 0 {
		return -1, 0, nil
	}
	return best, bf, r.workers[best]
}

func (r *runner) stopAll() {
	r.mu.Lock()
	ws := append([]*worker(nil), r.workers...)
	r.mu.Unlock()
	for _, w := range ws {
		if w != nil && w.cmd.Process != nil {
			_ = w.cmd.Process.Signal(syscall.SIGCONT)
			_ = w.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, w := range ws {
		if w == nil {
			continue
		}
		select {
		case <-w.done:
		case <-time.After(5*r.cfg.TTL + 5*time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
}
