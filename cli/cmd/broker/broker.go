// Package broker is `bindery brokers register|list|relist|deregister`:
// the cluster's brokers, or with -n a namespace's own.
package broker

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
	"github.com/bindery-dev/bindery/cli/internal/wait"
	"github.com/bindery-dev/bindery/internal/message"
)

// NewCmd builds `brokers` and its verbs.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "brokers", Aliases: []string{"broker"}, Short: "Register, list, relist and deregister OSB brokers (admin for changes)",
		Long: "Register, list, relist and deregister OSB brokers.\n\n" +
			"Without -n these are the cluster's brokers, whose classes and plans every namespace sees; changing them\n" +
			"needs an admin token for all namespaces. With -n NAMESPACE they are that namespace's own brokers\n" +
			"(Service Catalog's ServiceBroker): only that namespace sees their classes and plans (`bindery marketplace -n`)\n" +
			"and provisions from them, and an admin token of that namespace may change them.",
		Example: "  bindery brokers register team-db https://db-broker.example -u USER -n team-a   # asks for the password\n" +
			"  bindery brokers list -n team-a"}
	cmd.AddCommand(newRegister(f, nil), newList(f, nil), newRelist(f, nil), newDeregister(f, nil))
	return cmd
}

// RegisterOptions are `brokers register`'s inputs.
type RegisterOptions struct {
	F                  *cmdutil.Factory
	Name, URL          string
	Username, Password string
	BearerToken        string
	Insecure           bool
	RelistDuration     string
	// NoWait registers without waiting for the first catalogue fetch.
	NoWait bool
	// BearerTokenStdin reads the bearer token from standard input.
	BearerTokenStdin bool
	// ReadSecret asks for the password or token without echoing it, when
	// standard input is a terminal; nil reads a line from F.IO.In.
	ReadSecret func() (string, error)
}

func newRegister(f *cmdutil.Factory, run func(context.Context, *RegisterOptions) error) *cobra.Command {
	o := &RegisterOptions{F: f}
	if run == nil {
		run = Register
	}
	cmd := &cobra.Command{
		Use:   "register NAME URL",
		Short: "Register a broker (the cluster's, or with -n a namespace's) and fetch its catalogue",
		Long: "Register a broker and wait for the first fetch of its catalogue: when it fails, the broker stays registered\n" +
			"(it is fetched again with backoff) and the command says why and exits with 5. --no-wait returns at once.\n\n" +
			"With -u USER and no -p, the password is read from standard input (asked for, without echo, on a terminal);\n" +
			"--bearer-token-stdin reads a bearer token the same way. Prefer these to -p and --bearer-token, which ps and\n" +
			"the shell's history show to others.",
		Example: "  bindery brokers register db https://db.example -u osb   # asks for the password\n" +
			"  pass show db-broker | bindery brokers register db https://db.example -u osb\n" +
			"  bindery brokers register db https://db.example --bearer-token-stdin < token.txt",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.URL = args[0], args[1]
			if o.ReadSecret == nil {
				o.ReadSecret = cmdutil.SecretPrompt(f, "broker password or token: ")
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Username, "username", "u", "", "basic auth username; without --password, the password is read from standard input")
	fl.StringVarP(&o.Password, "password", "p", "", "basic auth password (visible to other users in ps: prefer standard input)")
	fl.StringVar(&o.BearerToken, "bearer-token", "", "a bearer token for the broker instead of basic auth (visible in ps: prefer --bearer-token-stdin)")
	fl.BoolVar(&o.BearerTokenStdin, "bearer-token-stdin", false, "read a bearer token for the broker from standard input")
	fl.BoolVar(&o.Insecure, "insecure-skip-tls-verify", false, "do not check the broker's TLS certificate")
	fl.StringVar(&o.RelistDuration, "relist-duration", "", "how often to fetch the catalogue again, e.g. 15m")
	fl.BoolVar(&o.NoWait, "no-wait", false, "do not wait for the first catalogue fetch")
	return cmd
}

// Register posts the broker.
func Register(ctx context.Context, o *RegisterOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	if o.Password != "" && o.Username == "" {
		return cmdutil.Usagef("--password needs --username")
	}
	if o.Username != "" && o.BearerToken != "" {
		return cmdutil.Usagef("--username and --bearer-token: give one kind of broker credentials")
	}
	if err := o.readSecrets(); err != nil {
		return err
	}
	body := map[string]any{"name": o.Name, "url": o.URL}
	if o.F.Namespace != "" {
		body["namespace"] = o.F.Namespace
	}
	if o.Insecure {
		body["insecureSkipTLSVerify"] = true
	}
	if o.RelistDuration != "" {
		body["relistDuration"] = o.RelistDuration
	}
	switch {
	case o.Username != "":
		body["auth"] = map[string]any{"basic": map[string]any{"username": o.Username, "password": o.Password}}
	case o.BearerToken != "":
		body["auth"] = map[string]any{"bearer": map[string]any{"token": o.BearerToken}}
	}
	var q url.Values
	if o.NoWait {
		q = url.Values{"wait": {"false"}}
	}
	var b api.Object
	if err := c.Do(ctx, http.MethodPost, "/brokers", q, body, &b); err != nil {
		return err
	}
	if err := Kind.Print(o.F, []api.Object{b}, true); err != nil {
		return err
	}
	if r := b.Condition("Ready"); !o.NoWait && r.Str("status") != "True" {
		// Registered all the same: the catalogue is fetched again with backoff.
		return wait.Failure(fmt.Sprintf("broker %s is registered, but its catalogue was not fetched: %s\n"+
			"It is fetched again with backoff; `bindery brokers relist %s%s` tries now.", o.Name, output.Safe(r.Str("message")), o.Name, nsFlag(o.F)))
	}
	return nil
}

// readSecrets reads the password (-u without -p) or the bearer token
// (--bearer-token-stdin) from standard input, as login reads its token, so
// that they need not be on the command line.
func (o *RegisterOptions) readSecrets() error {
	var what string
	var into *string
	switch {
	case o.BearerTokenStdin && (o.Username != "" || o.BearerToken != ""):
		return cmdutil.Usagef("--username and --bearer-token-stdin: give one kind of broker credentials")
	case o.BearerTokenStdin:
		what, into = "no bearer token", &o.BearerToken
	case o.Username != "" && o.Password == "":
		what, into = "no password for broker user "+o.Username, &o.Password
	default:
		return nil
	}
	secret, err := cmdutil.ReadSecret(o.F, o.ReadSecret)
	if err != nil {
		return fmt.Errorf("read the broker's credentials from standard input: %w", err)
	}
	if secret == "" {
		return cmdutil.Usagef("%s: give it on standard input (asked for on a terminal), or with the flag", what)
	}
	*into = secret
	return nil
}

// ListOptions are `brokers list`'s inputs.
type ListOptions struct{ F *cmdutil.Factory }

func newList(f *cmdutil.Factory, run func(context.Context, *ListOptions) error) *cobra.Command {
	o := &ListOptions{F: f}
	if run == nil {
		run = List
	}
	return &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List the cluster's brokers, or with -n a namespace's", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
}

// List prints every broker.
func List(ctx context.Context, o *ListOptions) error {
	if err := output.Check(o.F.Output); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	items, err := c.List(ctx, "/brokers", o.F.ScopeQuery())
	if err != nil {
		return err
	}
	return Kind.Print(o.F, items, false)
}

// RelistOptions are `brokers relist`'s inputs.
type RelistOptions struct {
	F    *cmdutil.Factory
	Name string
}

func newRelist(f *cmdutil.Factory, run func(context.Context, *RelistOptions) error) *cobra.Command {
	o := &RelistOptions{F: f}
	if run == nil {
		run = Relist
	}
	return &cobra.Command{
		Use: "relist NAME", Short: "Fetch a broker's catalogue now", Args: cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.First(cmdutil.Completer(f, "/brokers", false, f.ScopeCompletion)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
}

// Relist fetches the catalogue and prints the broker; a failed fetch is a
// failed operation.
func Relist(ctx context.Context, o *RelistOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	var b api.Object
	if err := c.Do(ctx, http.MethodPost, api.Path("brokers", o.Name, "relist"), o.F.ScopeQuery(), nil, &b); err != nil {
		return err
	}
	if err := Kind.Print(o.F, []api.Object{b}, true); err != nil {
		return err
	}
	if r := b.Condition("Ready"); r.Str("status") != "True" {
		return wait.Failure(fmt.Sprintf("the catalogue of broker %s could not be fetched: %s", o.Name, output.Safe(r.Str("message"))))
	}
	return nil
}

// DeregisterOptions are `brokers deregister`'s inputs.
type DeregisterOptions struct {
	F    *cmdutil.Factory
	Name string
}

func newDeregister(f *cmdutil.Factory, run func(context.Context, *DeregisterOptions) error) *cobra.Command {
	o := &DeregisterOptions{F: f}
	if run == nil {
		run = Deregister
	}
	return &cobra.Command{
		Use: "deregister NAME", Short: "Deregister a broker with its classes and plans", Args: cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.First(cmdutil.Completer(f, "/brokers", false, f.ScopeCompletion)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
}

// Deregister deletes the broker.
func Deregister(ctx context.Context, o *DeregisterOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	if err := c.Do(ctx, http.MethodDelete, api.Path("brokers", o.Name), o.F.ScopeQuery(), nil, nil); err != nil {
		return err
	}
	if o.F.Namespace != "" {
		fmt.Fprintf(o.F.IO.Out, "broker %s deregistered from namespace %s\n", o.Name, o.F.Namespace)
		return nil
	}
	fmt.Fprintf(o.F.IO.Out, "broker %s deregistered\n", o.Name)
	return nil
}

// nsFlag is " -n NS" when the command was given a namespace, for the
// commands a message suggests.
func nsFlag(f *cmdutil.Factory) string {
	if f.Namespace == "" {
		return ""
	}
	return " -n " + f.Namespace
}

// Kind is how the verbs print brokers.
var Kind = cmdutil.Kind{
	Plural: "brokers", Singular: "broker",
	Header: []string{"NAME", "URL", "STATUS", "CLASSES", "PLANS", "MESSAGE"},
	Row: func(b api.Object) []string {
		r := b.Condition("Ready")
		status := "Pending"
		if reason := r.Str("reason"); reason != "" {
			status = message.ReasonOf(reason).Word
		}
		return []string{b.Str("name"), b.Str("spec", "url"), status,
			strconv.FormatInt(b.Int("status", "serviceClassCount"), 10), strconv.FormatInt(b.Int("status", "servicePlanCount"), 10), output.Or(r.Str("message"))}
	},
}
