// Package broker is `bindery brokers register|list|relist|deregister`:
// the cluster's brokers, or with -n a namespace's own.
package broker

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// NewCmd builds `brokers` and its verbs.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "brokers", Aliases: []string{"broker"}, Short: "Register, list, relist and deregister OSB brokers (admin for changes)",
		Long: "Register, list, relist and deregister OSB brokers.\n\n" +
			"Without -n these are the cluster's brokers, whose classes and plans every namespace sees; changing them\n" +
			"needs an admin token for all namespaces. With -n NAMESPACE they are that namespace's own brokers\n" +
			"(Service Catalog's ServiceBroker): only that namespace sees their classes and plans (`bindery marketplace -n`)\n" +
			"and provisions from them, and an admin token of that namespace may change them.",
		Example: "  bindery brokers register team-db https://db-broker.example -u USER -p PASS -n team-a\n" +
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
}

func newRegister(f *cmdutil.Factory, run func(context.Context, *RegisterOptions) error) *cobra.Command {
	o := &RegisterOptions{F: f}
	if run == nil {
		run = Register
	}
	cmd := &cobra.Command{
		Use:   "register NAME URL",
		Short: "Register a broker (the cluster's, or with -n a namespace's) and fetch its catalogue",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.URL = args[0], args[1]
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Username, "username", "u", "", "basic auth username")
	fl.StringVarP(&o.Password, "password", "p", "", "basic auth password")
	fl.StringVar(&o.BearerToken, "bearer-token", "", "a bearer token for the broker instead of basic auth")
	fl.BoolVar(&o.Insecure, "insecure-skip-tls-verify", false, "do not check the broker's TLS certificate")
	fl.StringVar(&o.RelistDuration, "relist-duration", "", "how often to fetch the catalogue again, e.g. 15m")
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
	var b api.Object
	if err := c.Do(ctx, http.MethodPost, "/brokers", nil, body, &b); err != nil {
		return err
	}
	if r := b.Condition("Ready"); r.Str("status") != "True" {
		// Registered all the same: the catalogue is fetched again with backoff.
		fmt.Fprintf(o.F.IO.ErrOut, "warning: broker %s is registered but its catalogue was not fetched: %s\n(it is retried with backoff; `bindery brokers relist %s%s` tries now)\n", o.Name, r.Str("message"), o.Name, nsFlag(o.F))
	}
	return printOne(o.F, b)
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
	return print(o.F, items)
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
		ValidArgsFunction: cmdutil.Completer(f, "/brokers", false, f.ScopeCompletion),
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
	if err := printOne(o.F, b); err != nil {
		return err
	}
	if r := b.Condition("Ready"); r.Str("status") != "True" {
		return fmt.Errorf("the catalogue of %s could not be fetched: %s", o.Name, r.Str("message"))
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
		ValidArgsFunction: cmdutil.Completer(f, "/brokers", false, f.ScopeCompletion),
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

func printOne(f *cmdutil.Factory, b api.Object) error {
	if ok, err := output.Structured(f.IO.Out, f.Output, b); ok {
		return err
	}
	return print(f, []api.Object{b})
}

func print(f *cmdutil.Factory, items []api.Object) error {
	if ok, err := output.Structured(f.IO.Out, f.Output, map[string]any{"items": items}); ok {
		return err
	}
	rows := make([][]string, 0, len(items))
	for _, b := range items {
		r := b.Condition("Ready")
		classes, _ := b.Get("status", "serviceClassCount").(float64)
		plans, _ := b.Get("status", "servicePlanCount").(float64)
		rows = append(rows, []string{b.Str("name"), b.Str("spec", "url"), output.Or(r.Str("reason")),
			strconv.Itoa(int(classes)), strconv.Itoa(int(plans)), output.Or(r.Str("message"))})
	}
	return output.Table(f.IO.Out, []string{"NAME", "URL", "STATUS", "CLASSES", "PLANS", "MESSAGE"}, rows)
}
