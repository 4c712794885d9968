// Servers the benchmark talks to, read from the same LEASE_TEST_* variables
// the test suites use (./scripts/test --exec sets them all).

package main

import (
	"fmt"
	"os"
	"strings"
)

// Env says where each server is; an empty field means the store is skipped.
type Env struct {
	RedisAddr string   // LEASE_TEST_REDIS_ADDR
	PGDSN     string   // LEASE_TEST_POSTGRES_DSN
	MySQLDSN  string   // LEASE_TEST_MYSQL_DSN (a go-sql-driver DSN)
	Etcd      []string // LEASE_TEST_ETCD_ENDPOINTS
	ZK        []string // LEASE_TEST_ZK_SERVERS
	NATS      string   // LEASE_TEST_NATS_URL
	Kube      string   // LEASE_TEST_K8S_KUBECONFIG
	FileDir   string   // a temporary directory for filelease
	Run       string   // unique per run: prefixes keys and namespaces
	// StatsRedis is the address of a private redis-server whose counters
	// the scenarios read (-private-redis); empty: none.
	StatsRedis string
}

func envFromOS(run, fileDir string) *Env {
	split := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	return &Env{
		RedisAddr: os.Getenv("LEASE_TEST_REDIS_ADDR"),
		PGDSN:     os.Getenv("LEASE_TEST_POSTGRES_DSN"),
		MySQLDSN:  os.Getenv("LEASE_TEST_MYSQL_DSN"),
		Etcd:      split(os.Getenv("LEASE_TEST_ETCD_ENDPOINTS")),
		ZK:        split(os.Getenv("LEASE_TEST_ZK_SERVERS")),
		NATS:      os.Getenv("LEASE_TEST_NATS_URL"),
		Kube:      os.Getenv("LEASE_TEST_K8S_KUBECONFIG"),
		FileDir:   fileDir,
		Run:       run,
	}
}

// PGTable is the lease table of this run's PostgreSQL systems (its queue
// table is PGTable + "_queue"): fresh per run and dropped at its end, so
// that dead row versions left by earlier runs (the shared test database
// may run without autovacuum) do not weigh on the figures.
func (e *Env) PGTable() string { return "leasekit_bench_" + e.Run }

// available reports whether the server behind store is configured, and if
// not, which variable is missing.
func (e *Env) available(store string) (bool, string) {
	switch store {
	case "redis":
		return e.RedisAddr != "", "LEASE_TEST_REDIS_ADDR"
	case "postgres-table", "postgres-advisory":
		return e.PGDSN != "", "LEASE_TEST_POSTGRES_DSN"
	case "mysql-table", "mysql-getlock":
		return e.MySQLDSN != "", "LEASE_TEST_MYSQL_DSN"
	case "etcd":
		return len(e.Etcd) > 0, "LEASE_TEST_ETCD_ENDPOINTS"
	case "zookeeper":
		return len(e.ZK) > 0, "LEASE_TEST_ZK_SERVERS"
	case "nats":
		return e.NATS != "", "LEASE_TEST_NATS_URL"
	case "k8s":
		return e.Kube != "", "LEASE_TEST_K8S_KUBECONFIG"
	case "file", "memory":
		return true, ""
	}
	return false, fmt.Sprintf("unknown store %q", store)
}

// childArgs passes the run id and file directory to a re-executed worker
// process; the server variables reach it through the inherited environment
// (never on the command line, where a DSN's password would show).
func (e *Env) childArgs() []string {
	return []string{"-env-file=" + e.FileDir, "-run=" + e.Run}
}
