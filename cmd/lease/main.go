// Entry point: dispatch to the subcommands.

package main

import (
	"fmt"
	"io"
	"os"

	"github.com/leasekit/lease/leaseurl"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "devel"

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// dispatch runs the subcommand named by args[0] and returns the exit code.
func dispatch(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCommand(args[1:], stdout, stderr)
	case "run-supervisor": // hidden: lease run's process supervisor (Linux)
		return supervisorCommand(args[1:], stderr)
	case "status":
		return statusCommand(args[1:], stdout, stderr)
	case "demo":
		return demoCommand(args[1:], stdout, stderr)
	case "demo-worker": // hidden: a worker process of lease demo
		return demoWorkerCommand(args[1:], stdin, stdout, stderr)
	case "verify":
		return verifyCommand(args[1:], stdout, stderr)
	case "verify-worker": // hidden: a worker process of lease verify
		return verifyWorkerCommand(stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "lease", version)
		return exitOK
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return dispatch([]string{args[1], "-h"}, stdin, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "lease: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `lease runs commands under distributed leases with fencing tokens.

Usage:
  lease run [flags] -- CMD [ARGS...]   run CMD while holding a lease
  lease status [flags] KEY             show who holds KEY
  lease demo [flags]                   the leasekit story with real processes
  lease verify [flags]                 prove the store safe under faults (kill -9, pauses, cuts)
  lease version                        print the version
  lease help COMMAND                   flags of COMMAND

The store is --store URL, else $LEASE_STORE, else the per-user file store,
here `+leaseurl.DefaultURL()+`
(the first of $XDG_STATE_HOME/leasekit, ~/.local/state/leasekit,
$XDG_CACHE_HOME/leasekit, $XDG_RUNTIME_DIR/leasekit, /tmp/leasekit-UID;
a directory other users can write to is refused).
URLs: file:///dir, redis://, rediss://, postgres://, etcd://, zk://, mem://;
any URL takes ?max_waiters=N, the cap of each key's queue of waiters
(default 1024).

Exit codes of lease run: the command's own code; 75 lease not acquired
(held with --no-wait, --timeout passed, or the key's queue of waiters full);
76 lease lost while the command ran; 64 usage; 69 store unavailable;
70 internal error; 126/127 command not executable/not found.

TLS: a postgres:// URL without sslmode uses sslmode=verify-full for a host
that is not loopback (add sslrootcert=CA-FILE for a private CA); localhost,
loopback addresses and unix sockets keep pgx's default, prefer, which does
NOT verify the server's certificate. rediss:// and etcds:// verify it;
rediss://...?skip_verify=true disables that verification (test servers only).
`)
}
