package starve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leaseurl"
)

// The test binary is re-executed as a holder (workerEnv: its config as
// JSON) or as a busy loop (burnEnv).
const (
	workerEnv = "LEASEKIT_STARVE_WORKER"
	burnEnv   = "LEASEKIT_STARVE_BURN"
)

func TestMain(m *testing.M) {
	if os.Getenv(burnEnv) != "" {
		burn()
	}
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(worker(spec))
	}
	os.Exit(m.Run())
}

// burn spins one core until the process is killed.
func burn() {
	runtime.GOMAXPROCS(1)
	for x := 0; ; x++ {
		if x == -1 {
			return
		}
	}
}

// workerConfig is one holder's task: hold Key in Store with TTL for Hold.
type workerConfig struct {
	Store, Key string
	TTL, Hold  time.Duration
}

// summary is what a holder reports on stdout when its time is up.
type summary struct {
	Holds, Losses, Renewals, RenewFailures, AcquireErrors int
	Reasons                                               map[string]int
	Errors                                                []string // the first few loss and acquisition errors
	Latencies                                             []time.Duration
}

func (s *summary) note(err string) {
	if len(s.Errors) < 4 && !slices.Contains(s.Errors, err) {
		s.Errors = append(s.Errors, err)
	}
}

// worker holds its key for its time, acquiring it again after each loss,
// and prints its summary.
func worker(spec string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "starve worker:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Hold)
	defer cancel()
	store, err := leaseurl.Open(context.Background(), cfg.Store)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starve worker:", err)
		return 2
	}
	defer store.Close()
	var mu sync.Mutex
	sum := summary{Reasons: map[string]int{}}
	obs := lease.ObserverFunc(func(e lease.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case lease.EventRenewed:
			sum.Renewals++
			sum.Latencies = append(sum.Latencies, e.Latency)
		case lease.EventRenewFailed:
			sum.RenewFailures++
		case lease.EventLost:
			sum.Losses++
			sum.Reasons[string(e.Reason)]++
			sum.note(fmt.Sprint(e.Err))
		}
	})
	client, err := lease.New(store, lease.WithTTL(cfg.TTL), lease.WithObserver(obs))
	if err != nil {
		fmt.Fprintln(os.Stderr, "starve worker:", err)
		return 2
	}
	for ctx.Err() == nil {
		l, err := client.Acquire(ctx, cfg.Key)
		if err != nil {
			if ctx.Err() == nil {
				mu.Lock()
				sum.AcquireErrors++
				sum.note("acquire: " + err.Error())
				mu.Unlock()
			}
			continue
		}
		mu.Lock()
		sum.Holds++
		mu.Unlock()
		select {
		case <-l.Done():
		case <-ctx.Done():
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = l.Release(rctx)
			rcancel()
		}
	}
	_ = client.Close()
	mu.Lock()
	defer mu.Unlock()
	if err := json.NewEncoder(os.Stdout).Encode(sum); err != nil {
		return 1
	}
	return 0
}

// envOr returns the environment variable name, or def.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// stores are the URLs of the stores the environment names, by short name.
func stores(t *testing.T) [][2]string {
	var out [][2]string
	add := func(name, u string) { out = append(out, [2]string{name, u}) }
	add("file", "file://"+t.TempDir())
	if a := os.Getenv("LEASE_TEST_REDIS_ADDR"); a != "" {
		add("redis", "redis://"+a+"/0")
	}
	if d := os.Getenv("LEASE_TEST_POSTGRES_DSN"); d != "" {
		add("postgres", d)
		u, err := url.Parse(d)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("mode", "advisory")
		u.RawQuery = q.Encode()
		add("postgres-advisory", u.String())
	}
	if d := os.Getenv("LEASE_TEST_MYSQL_DSN"); d != "" {
		cfg, err := mysql.ParseDSN(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"table", "getlock"} {
			u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr,
				Path: "/" + cfg.DBName, RawQuery: "mode=" + mode}
			if cfg.Passwd == "" {
				u.User = url.User(cfg.User)
			}
			add("mysql-"+mode, u.String())
		}
	}
	if e := os.Getenv("LEASE_TEST_ETCD_ENDPOINTS"); e != "" {
		add("etcd", "etcd://"+strings.Split(e, ",")[0])
	}
	if z := os.Getenv("LEASE_TEST_ZK_SERVERS"); z != "" {
		add("zookeeper", "zk://"+strings.Split(z, ",")[0])
	}
	if n := os.Getenv("LEASE_TEST_NATS_URL"); n != "" {
		add("nats", n+"/leasekit-starve")
	}
	if k := os.Getenv("LEASE_TEST_K8S_KUBECONFIG"); k != "" {
		add("k8s", "k8s:///default?kubeconfig="+url.QueryEscape(k))
	}
	if only := os.Getenv("LEASE_VERIFY_STARVE_STORES"); only != "" {
		out = slices.DeleteFunc(out, func(s [2]string) bool { return !slices.Contains(strings.Split(only, ","), s[0]) })
	}
	return out
}

// TestStarve runs, for each store and TTL, 4 holder processes beside busy
// loops on every core at the same nice, and reports the losses: each on a
// key of its own, then all on one key (one holds, three wait, as 4 `lease
// run` of one job would). Nothing kills or stops a holder, so every loss is
// a false one. Settings:
// LEASE_VERIFY_STARVE_TTLS (1s,2s,10s), _DURATION per run (30s), _BURNERS
// (one per core), _STORES (every store of the environment: file, redis,
// postgres, postgres-advisory, mysql-table, mysql-getlock, etcd, zookeeper,
// nats, k8s), _REPORT (a file the table is appended to).
func TestStarve(t *testing.T) {
	if os.Getenv("LEASE_VERIFY_STARVE") != "1" {
		t.Skip("a measurement, not a check: set LEASE_VERIFY_STARVE=1 (see docs/RELIABILITY.md)")
	}
	dur, err := time.ParseDuration(envOr("LEASE_VERIFY_STARVE_DURATION", "30s"))
	if err != nil {
		t.Fatal(err)
	}
	burners, err := strconv.Atoi(envOr("LEASE_VERIFY_STARVE_BURNERS", strconv.Itoa(runtime.NumCPU())))
	if err != nil {
		t.Fatal(err)
	}
	var ttls []time.Duration
	for _, s := range strings.Split(envOr("LEASE_VERIFY_STARVE_TTLS", "1s,2s,10s"), ",") {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		ttls = append(ttls, d)
	}
	table := fmt.Sprintf("%d holders per run, %v each, %d busy loops, %s\n\n", 4, dur, burners, time.Now().UTC().Format(time.DateOnly)) +
		"| store | TTL | keys | holds | false losses (reasons) | renewals failed/sent | renewal p99 / max | load avg | first loss |\n|---|---|---|---|---|---|---|---|---|\n"
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, st := range stores(t) {
		for _, ttl := range ttls {
			if st[0] == "etcd" && ttl < 2*time.Second {
				continue // etcd's minimum TTL
			}
			for _, one := range []bool{false, true} {
				row := measure(t, st, ttl, dur, burners, one, fmt.Sprintf("starve-%s-%d-%v-", id, ttl.Milliseconds(), one))
				t.Log(row)
				table += row + "\n"
			}
		}
	}
	t.Logf("\n%s", table)
	if f := os.Getenv("LEASE_VERIFY_STARVE_REPORT"); f != "" {
		if err := os.WriteFile(f, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// measure runs one store at one TTL and returns its table row.
func measure(t *testing.T, st [2]string, ttl, dur time.Duration, burners int, oneKey bool, key string) string {
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	for range burners {
		p := exec.Command(os.Args[0], "-test.run=^$")
		p.Env = append(os.Environ(), burnEnv+"=1")
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	time.Sleep(time.Second) // the load is on
	var (
		mu   sync.Mutex
		all  summary
		wg   sync.WaitGroup
		errs []string
	)
	all.Reasons = map[string]int{}
	for i := range 4 {
		k := fmt.Sprintf("%s%s-%d", key, st[0], i)
		if oneKey {
			k = key + st[0]
		}
		spec, _ := json.Marshal(workerConfig{Store: st[1], Key: k, TTL: ttl, Hold: dur})
		p := exec.Command(os.Args[0], "-test.run=^$")
		p.Env = append(os.Environ(), workerEnv+"="+string(spec))
		out, err := p.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		p.Stderr = &stderr
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s summary
			dec := json.NewDecoder(bufio.NewReader(out))
			derr := dec.Decode(&s)
			werr := p.Wait()
			mu.Lock()
			defer mu.Unlock()
			if err := errors.Join(derr, werr); err != nil {
				errs = append(errs, fmt.Sprintf("worker %d: %v: %s", i, err, stderr.String()))
				return
			}
			all.Holds += s.Holds
			all.Losses += s.Losses
			all.Renewals += s.Renewals
			all.RenewFailures += s.RenewFailures
			all.AcquireErrors += s.AcquireErrors
			for r, n := range s.Reasons {
				all.Reasons[r] += n
			}
			for _, e := range s.Errors {
				all.note(e)
			}
			all.Latencies = append(all.Latencies, s.Latencies...)
		}()
	}
	wg.Wait()
	load, _ := os.ReadFile("/proc/loadavg")
	for _, e := range errs {
		t.Errorf("%s at %v: %s", st[0], ttl, e)
	}
	slices.Sort(all.Latencies)
	p99, worst := time.Duration(0), time.Duration(0)
	if n := len(all.Latencies); n > 0 {
		p99, worst = all.Latencies[n*99/100], all.Latencies[n-1]
	}
	var reasons []string
	for r, n := range all.Reasons {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(reasons)
	first := ""
	if len(all.Errors) > 0 {
		first = strings.ReplaceAll(all.Errors[0], "|", "/")
	}
	keys := "own"
	if oneKey {
		keys = "one"
	}
	return fmt.Sprintf("| %s | %v | %s | %d | %d (%s) | %d/%d | %v / %v | %s | %.160s |", st[0], ttl, keys, all.Holds, all.Losses,
		strings.Join(reasons, ", "), all.RenewFailures, all.Renewals+all.RenewFailures,
		p99.Round(time.Millisecond), worst.Round(time.Millisecond), strings.Join(strings.Fields(string(load))[:3], " "), first)
}
