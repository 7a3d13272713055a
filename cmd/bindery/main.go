// Command bindery runs Bindery: `bindery up` starts everything on one
// machine, `bindery serve COMPONENT` runs one component, and `bindery
// migrate` and `bindery token` manage the database; the rest of the
// command line is the REST API's client (cli/).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/bindery-dev/bindery/cli"
	"github.com/bindery-dev/bindery/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The command line client (cli/) reads the command line; the server
	// commands come back to run. Called as kubectl-bindery, it is a
	// kubectl plugin.
	code := cli.Main(ctx, os.Args[0], os.Args[1:], cli.Streams(), cliServer())
	stop()
	os.Exit(code)
}

// env is what every command gets: where to print and how to log.
type env struct {
	stdout io.Writer
	stderr io.Writer
	// flagSets, when not nil, collects the flag sets the command makes
	// (newFlagSet), for the configuration reference (docs.go).
	flagSets *[]*flag.FlagSet
}

// logger builds the process logger at the given level; logs go to stderr.
func (e env) logger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: l})), nil
}

type command struct {
	summary string
	run     func(ctx context.Context, e env, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"up":      {"run everything on this machine (embedded PostgreSQL unless DATABASE_URL is set)", runUp},
		"down":    {"remove from a cluster what `bindery up --kubeconfig` installed there", runDown},
		"serve":   {"run one component: " + strings.Join(componentNames(), "|"), runServe},
		"migrate": {"apply or revert database migrations: up|down|version", runMigrate},
		"keys":    {"seal every secret again with the first encryption key, after a rotation: keys reseal", runKeys},
		"version": {"print the version Bindery was built as", runVersion},
		"docs":    {"print the configuration reference, every server flag and variable: docs config", runDocs},
	}
}

func runVersion(_ context.Context, e env, args []string) error {
	if helpAsked(args) {
		fmt.Fprintln(e.stderr, "usage: bindery version")
		return flag.ErrHelp
	}
	if len(args) > 0 {
		return usagef("version takes no arguments, got %q", args)
	}
	_, err := fmt.Fprintln(e.stdout, version.String())
	return err
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	e := env{stdout: stdout, stderr: stderr}
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return usagef("missing command")
		}
		return nil
	}
	c, ok := cmds[args[0]]
	if !ok {
		usage(stderr, cmds)
		return usagef("unknown command %q", args[0])
	}
	return c.run(ctx, e, args[1:])
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: bindery COMMAND [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nEvery flag can also be set as BINDERY_<FLAG> (dashes become underscores); DATABASE_URL sets --database-url.")
}

// helpAsked reports whether args ask for help (-h, --help, help) before
// naming anything; the caller prints its usage and returns flag.ErrHelp.
func helpAsked(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help")
}
