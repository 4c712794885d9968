// The command tree (cobra): exit codes through errors, one-line usage
// errors, and flags read from LEASE_* environment variables.

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leasekit/lease/internal/oneline"
	"github.com/leasekit/lease/internal/termtext"
	"github.com/leasekit/lease/leaseurl"
)

// exitError carries a subcommand's exit code out of cobra; its message has
// already been printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// exit turns a subcommand's exit code into RunE's error.
func exit(code int) error {
	if code == exitOK {
		return nil
	}
	return exitError{code}
}

// execute runs the command line args and returns the exit code.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	}
	// A bad flag, argument or command, from cobra or pflag.
	if !cmd.HasParent() {
		fmt.Fprintf(stderr, "lease: %s (lease help lists the commands)\n", termtext.Escape(oneline.Join(err.Error())))
		return exitUsage
	}
	return fail(stderr, cmd.Name(), exitUsage, "%v (lease help %s lists the flags)", err, cmd.Name())
}

// newRoot returns the lease command and its subcommands.
func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "lease",
		Short: "Run commands under distributed leases with fencing tokens",
		Long: `lease runs commands under distributed leases with fencing tokens, and shows,
lists, watches and breaks the leases of a store.

The store is --store URL (-s), else $LEASE_STORE, else the per-user file store,
here ` + leaseurl.DefaultURL() + `
(the first of $XDG_STATE_HOME/leasekit, ~/.local/state/leasekit,
$XDG_CACHE_HOME/leasekit, $XDG_RUNTIME_DIR/leasekit, /tmp/leasekit-UID;
a directory other users can write to is refused).
URLs: file:///dir, redis://, rediss://, postgres://, etcd://, zk://, nats://,
natss://, mem://; any URL of a store that queues waiters takes ?max_waiters=N,
the cap of each key's queue (default 1024).

Every flag can also be set in the environment: --no-wait as LEASE_NO_WAIT,
--ttl as LEASE_TTL, and so on; a flag given on the command line wins.
Not read from the environment: run's --holder, --shared and --key (lease run
sets LEASE_HOLDER, LEASE_SHARED and LEASE_KEY for its command, which may run
lease itself) and demo's --store (the demo uses a temporary store unless told).

Exit codes of lease run: the command's own code; 75 lease not acquired
(held with --no-wait, --timeout passed, or the key's queue of waiters full);
76 lease lost while the command ran; 64 usage; 69 store unavailable, or
unable to list or break; 70 internal error; 126/127 command not
executable/not found.

TLS: a postgres:// URL without sslmode uses sslmode=verify-full for a host
that is not loopback (add sslrootcert=CA-FILE for a private CA); localhost,
loopback addresses and unix sockets keep pgx's default, prefer, which does
NOT verify the server's certificate. rediss://, etcds:// and natss:// verify it;
rediss://...?skip_verify=true disables that verification (test servers only).`,
		Example: `  lease run job:invoice -- ./generate-invoices
  lease run -n 3 -t 30s pool:render -- ./render
  lease status job:invoice
  lease list job:
  lease break --yes job:invoice
  lease watch -s redis://localhost:6379 job:
  source <(lease completion bash)`,
		Version:           version,
		Args:              cobra.NoArgs,
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return flagsFromEnv(cmd.Flags()) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(stderr)
			_ = cmd.Usage()
			return exit(exitUsage)
		},
	}
	root.SetVersionTemplate("lease {{.Version}}\n")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.AddCommand(
		newRunCmd(stderr),
		newStatusCmd(stdout, stderr),
		newListCmd(stdout, stderr),
		newBreakCmd(stdin, stdout, stderr),
		newWatchCmd(stdout, stderr),
		newDemoCmd(stdout, stderr),
		newVerifyCmd(stdout, stderr),
		&cobra.Command{
			Use:   "version",
			Short: "Print the version",
			Args:  cobra.NoArgs,
			Run:   func(*cobra.Command, []string) { fmt.Fprintln(stdout, "lease", version) },
		},
		hidden("run-supervisor", func(args []string) int { return supervisorCommand(args, stderr) }),
		hidden("demo-worker", func(args []string) int { return demoWorkerCommand(args, stdin, stdout, stderr) }),
		hidden("verify-worker", func([]string) int { return verifyWorkerCommand(stderr) }),
	)
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil {
		c.Example = `  source <(lease completion bash)
  lease completion zsh > "${fpath[1]}/_lease"
  lease completion fish > ~/.config/fish/completions/lease.fish`
	}
	return root
}

// hidden returns a command lease starts itself (a supervisor, a worker):
// it parses its own flags.
func hidden(name string, run func(args []string) int) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE:               func(_ *cobra.Command, args []string) error { return exit(run(args)) },
	}
}

// oneArg accepts exactly one argument, named name in the error.
func oneArg(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("want exactly one %s, got %d arguments", name, len(args))
		}
		return nil
	}
}

// noEnv marks a flag that is not read from the environment.
const noEnv = "lease_no_env"

// envName returns the environment variable of flag name: LEASE_NO_WAIT for
// no-wait.
func envName(name string) string {
	return "LEASE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// withEnv appends each flag's environment variable to its help, and returns
// fs. Call it after the flags are defined.
func withEnv(fs *pflag.FlagSet) *pflag.FlagSet {
	fs.VisitAll(func(f *pflag.Flag) {
		if readsEnv(f) {
			f.Usage += " [$" + envName(f.Name) + "]"
		}
	})
	return fs
}

func readsEnv(f *pflag.Flag) bool {
	return f.Name != "help" && f.Name != "version" && f.Annotations[noEnv] == nil
}

// skipEnv marks flags of fs as not read from the environment.
func skipEnv(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		_ = fs.SetAnnotation(n, noEnv, []string{"true"})
	}
}

// flagsFromEnv sets every flag not given on the command line from its
// LEASE_* variable, if that is set and not empty.
func flagsFromEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		v := os.Getenv(envName(f.Name))
		if err != nil || f.Changed || v == "" || !readsEnv(f) {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("$%s: invalid value %q for --%s: %w", envName(f.Name), v, f.Name, e)
		}
	})
	return err
}
