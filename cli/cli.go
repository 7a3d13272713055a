// Package cli is Bindery's command line client of the REST API
// (openapi/openapi.yaml): login, brokers, marketplace, instances, bindings,
// credentials, describe and tokens, for people (tables, progress) and for
// scripts (-o json|yaml, stable exit codes). Each verb lives in
// cli/cmd/NOUN with an Options struct, a constructor that builds its cobra
// command and a run function that writes to injected streams; Main decides
// the exit code from the error's type.
//
// The verbs that only talk to the REST API are tested through their
// command lines against a scripted API (cli/internal/clitest), their output
// compared exactly. login and token, which also keep a login or open the
// database, are tested end to end (cli_test.go against a real catalog,
// token's choice of database in its package); health against a TLS server.
//
// The same binary runs Bindery's servers: the server commands are handed
// in as Server and run unchanged, with their own flags and BINDERY_*
// environment variables.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/bindery-dev/bindery/cli/cmd/binding"
	"github.com/bindery-dev/bindery/cli/cmd/broker"
	"github.com/bindery-dev/bindery/cli/cmd/describe"
	"github.com/bindery-dev/bindery/cli/cmd/export"
	"github.com/bindery-dev/bindery/cli/cmd/health"
	"github.com/bindery-dev/bindery/cli/cmd/instance"
	"github.com/bindery-dev/bindery/cli/cmd/login"
	"github.com/bindery-dev/bindery/cli/cmd/marketplace"
	"github.com/bindery-dev/bindery/cli/cmd/quota"
	"github.com/bindery-dev/bindery/cli/cmd/token"
	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
	"github.com/bindery-dev/bindery/cli/internal/wait"
)

// The exit codes, stable for scripts (docs/cli.md).
const (
	ExitOK = 0
	// ExitFailed: the command could not do its work (the server cannot be
	// reached, a name is taken, …).
	ExitFailed    = 1
	ExitUsage     = 2
	ExitNotFound  = 3
	ExitForbidden = 4
	// ExitOperationFailed: the broker or the engine failed the operation
	// for good (--wait), or a broker's catalogue could not be fetched.
	ExitOperationFailed = 5
	// ExitBlocked: --wait found the operation blocked until a person acts
	// (bindings to delete first, a class, plan or instance that stayed
	// missing past the grace period).
	ExitBlocked = 6
	// ExitTimeout: --wait ran out of --timeout; the operation goes on.
	ExitTimeout = 7
)

// IOStreams are the streams the CLI uses; see cmdutil.IOStreams.
type IOStreams = cmdutil.IOStreams

// UsageError is a command line that cannot work as given (exit code 2);
// the server commands return it for their flags.
type UsageError = cmdutil.UsageError

// Server describes the server commands the binary also runs.
type Server struct {
	// Commands are the server commands' names and one-line summaries,
	// listed in the help.
	Commands map[string]string
	// Run runs a server command line, its name first.
	Run func(ctx context.Context, args []string) error
	// Tokens opens databases' tokens for `bindery token`; without it, the
	// token commands go over the REST API only.
	Tokens *token.Databases
}

// PluginName is the name kubectl finds the binary by as a plugin.
const PluginName = "kubectl-bindery"

// Main runs the command line args (without the program name) as the
// program called name, and returns the exit code.
func Main(ctx context.Context, name string, args []string, io IOStreams, srv Server) int {
	return run(ctx, cmdutil.NewFactory(io), name, args, srv)
}

// run is Main with the factory given, so that tests choose the environment.
func run(ctx context.Context, f *cmdutil.Factory, name string, args []string, srv Server) int {
	io := f.IO
	root := NewRoot(f, name, srv)
	root.SetArgs(args)
	started := false
	root.PersistentPreRunE = func(*cobra.Command, []string) error { started = true; return f.CheckNamespace() }
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitCode(err)
	if !started && code == ExitFailed {
		// cobra refused the command line before running anything:
		// an unknown command, a bad flag, a wrong number of arguments.
		code = ExitUsage
		fmt.Fprintf(io.ErrOut, "%s: %v\nRun '%s --help' for usage.\n", root.Name(), err, root.CommandPath())
		return code
	}
	if errors.Is(err, errServer) {
		return code // printed already
	}
	fmt.Fprintf(io.ErrOut, "%s: %v\n", root.Name(), err)
	return code
}

// errServer marks a server command's error, already printed.
var errServer = errors.New("server command failed")

// ExitCode maps an error to the exit code: 2 for usage, 3 for not found,
// 4 for a token refused or not allowed, 5 for an operation failed, 6 for
// one blocked, 7 for a wait timed out, 1 for anything else.
func ExitCode(err error) int {
	var u *cmdutil.UsageError
	var a *api.Error
	var nf *cmdutil.NotFoundError
	var te *wait.TimeoutError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &u):
		return ExitUsage
	case errors.As(err, &a) && a.Status == http.StatusNotFound, errors.Is(err, token.ErrNotFound), errors.As(err, &nf):
		return ExitNotFound
	case errors.As(err, &a) && (a.Status == http.StatusForbidden || a.Status == http.StatusUnauthorized):
		return ExitForbidden
	case errors.As(err, &a) && a.Status == http.StatusBadRequest:
		return ExitUsage
	case errors.Is(err, wait.ErrFailed):
		return ExitOperationFailed
	case errors.Is(err, wait.ErrBlocked):
		return ExitBlocked
	case errors.As(err, &te):
		return ExitTimeout
	}
	return ExitFailed
}

// NewRoot builds the whole command tree.
func NewRoot(f *cmdutil.Factory, name string, srv Server) *cobra.Command {
	root := &cobra.Command{
		Use:   "bindery",
		Short: "Bindery: an Open Service Broker marketplace",
		Long: "Bindery runs an Open Service Broker marketplace and is its command line.\n\n" +
			"Start with `bindery login URL`, then `bindery marketplace`, `bindery provision`, `bindery bind`.\n" +
			"Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 forbidden, 5 operation failed, 6 blocked, 7 --wait timed out.",
		SilenceErrors: true,
		SilenceUsage:  true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: false,
		},
	}
	if filepath.Base(name) == PluginName {
		// kubectl's plugin convention: help and usage say `kubectl bindery`.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl bindery"}
	}
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetIn(f.IO.In)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.UsageError{Err: err} })
	pf := root.PersistentFlags()
	pf.StringVarP(&f.Namespace, "namespace", "n", "", "the namespace of instances and bindings (default \"default\"); for brokers and the marketplace, a namespace's own brokers, classes and plans (default: the cluster's)")
	cmdutil.EnumVar(root, pf, &f.Output, "output", "o", "", []string{"table", "json", "yaml", "env", "dotenv", "env-file"},
		"output format (credentials: json, yaml, env, dotenv or env-file)")
	_ = root.RegisterFlagCompletionFunc("namespace", cmdutil.Namespaces(f))

	root.AddGroup(&cobra.Group{ID: "client", Title: "Client commands (over the REST API):"})
	if len(srv.Commands) > 0 {
		root.AddGroup(&cobra.Group{ID: "server", Title: "Server commands:"})
	}
	client := []*cobra.Command{
		login.NewCmd(f, nil), broker.NewCmd(f), marketplace.NewCmd(f, nil),
		instance.NewProvision(f, nil), instance.NewList(f), instance.NewUpdate(f, nil), instance.NewDeprovision(f),
		binding.NewBind(f, nil), binding.NewList(f), binding.NewCredentials(f, nil), binding.NewUnbind(f),
		describe.NewCmd(f, nil), quota.NewCmd(f), export.NewCmd(f, nil),
	}
	for _, c := range client {
		c.GroupID = "client"
		root.AddCommand(c)
		noPositionalFiles(c)
	}
	h := health.NewCmd(nil)
	h.Hidden = true // for containers, not people
	root.AddCommand(h)
	tok := token.NewCmd(f, srv.Tokens)
	tok.GroupID = "server"
	if len(srv.Commands) == 0 {
		tok.GroupID = "client"
	}
	root.AddCommand(tok)
	for n, summary := range srv.Commands {
		c := serverCmd(srv, n, summary)
		c.GroupID = "server"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("client")
	root.SetCompletionCommandGroupID("client")
	return root
}

// noPositionalFiles makes every command under c that says nothing of
// its positional arguments' completions offer nothing for them (cobra
// would offer file names): the client commands take names of objects, or
// none at all.
func noPositionalFiles(c *cobra.Command) {
	if c.ValidArgsFunction == nil && !c.HasSubCommands() {
		c.ValidArgsFunction = cobra.NoFileCompletions
	}
	for _, sub := range c.Commands() {
		noPositionalFiles(sub)
	}
}

// serverCmd hands a server command line to the server's own parser.
func serverCmd(srv Server, name, summary string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              summary,
		DisableFlagParsing: true, // the server commands parse their own flags and BINDERY_* variables
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := srv.Run(cmd.Context(), append([]string{name}, args...)); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return nil
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "bindery: %v\n", err)
				return fmt.Errorf("%w: %w", errServer, err)
			}
			return nil
		},
	}
}

// Streams returns the process's streams, with terminal checks on stderr
// (progress) and stdout (tables), and stdout's width.
func Streams() IOStreams { return StreamsOf(os.Stdin, os.Stdout, os.Stderr) }

// StreamsOf returns streams over files, telling which are terminals.
func StreamsOf(in io.Reader, out, errOut *os.File) IOStreams {
	t := output.Term{On: term.IsTerminal(int(out.Fd()))}
	if t.On {
		t.Width, _, _ = term.GetSize(int(out.Fd()))
	}
	return IOStreams{In: in, Out: out, ErrOut: errOut, IsTerminal: term.IsTerminal(int(errOut.Fd())), OutTerm: t}
}
