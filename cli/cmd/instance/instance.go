// Package instance is `bindery provision`, `instances`, `update` and
// `deprovision`.
package instance

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
	"github.com/bindery-dev/bindery/cli/internal/wait"
)

// WaitFlags are --wait and --timeout, shared by the verbs that change.
type WaitFlags struct {
	Wait    bool
	Timeout time.Duration
}

// Add registers the flags.
func (w *WaitFlags) Add(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&w.Wait, "wait", "w", false, "follow the operation until it ends, showing its progress")
	cmd.Flags().DurationVar(&w.Timeout, "timeout", 0, "with --wait, stop waiting after this long (0: no limit)")
}

// Follow waits when asked to; a failed operation is an error.
func (w WaitFlags) Follow(ctx context.Context, f *cmdutil.Factory, c *api.Client, path string, goal wait.Goal) (api.Object, error) {
	if !w.Wait {
		return nil, nil
	}
	return wait.Follow(ctx, wait.Options{Client: c, Path: path, Query: f.NSQuery(), Goal: goal,
		Out: f.IO.ErrOut, Terminal: f.IO.IsTerminal, Timeout: w.Timeout})
}

// ProvisionOptions are `provision`'s inputs.
type ProvisionOptions struct {
	F           *cmdutil.Factory
	Name        string
	Class, Plan string
	Params      []string
	ParamsJSON  string
	Wait        WaitFlags
}

// NewProvision builds `provision NAME -c CLASS -p PLAN`.
func NewProvision(f *cmdutil.Factory, run func(context.Context, *ProvisionOptions) error) *cobra.Command {
	o := &ProvisionOptions{F: f}
	if run == nil {
		run = Provision
	}
	cmd := &cobra.Command{
		Use:   "provision NAME -c CLASS -p PLAN",
		Short: "Create a service instance",
		Example: "  bindery provision orders-db -c postgresql -p small --param size=10 --wait\n" +
			"  bindery provision orders-db -c postgresql -p small --params-json @params.json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Class, "class", "c", "", "the service class (its external name, see `bindery marketplace`)")
	fl.StringVarP(&o.Plan, "plan", "p", "", "the plan (its external name)")
	fl.StringArrayVar(&o.Params, "param", nil, "a parameter KEY=VALUE (repeatable; VALUE is JSON when it parses as JSON)")
	fl.StringVar(&o.ParamsJSON, "params-json", "", "parameters as a JSON object, or @FILE")
	o.Wait.Add(cmd)
	_ = cmd.RegisterFlagCompletionFunc("class", cmdutil.Completer(f, "/serviceclasses", false, nil))
	_ = cmd.RegisterFlagCompletionFunc("plan", cmdutil.Completer(f, "/serviceplans", false, func(cmd *cobra.Command) url.Values {
		if c, _ := cmd.Flags().GetString("class"); c != "" {
			return url.Values{"class": {c}}
		}
		return url.Values{}
	}))
	return cmd
}

// Provision creates the instance and, with --wait, follows it.
func Provision(ctx context.Context, o *ProvisionOptions) error {
	if o.Class == "" || o.Plan == "" {
		return cmdutil.Usagef("-c CLASS and -p PLAN are required: `bindery marketplace` lists them")
	}
	params, err := cmdutil.Params(o.Params, o.ParamsJSON)
	if err != nil {
		return err
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	spec := map[string]any{"clusterServiceClassExternalName": o.Class, "clusterServicePlanExternalName": o.Plan}
	if params != nil {
		spec["parameters"] = params
	}
	var in api.Object
	body := map[string]any{"name": o.Name, "namespace": o.F.NS(), "spec": spec}
	if err := c.Do(ctx, http.MethodPost, "/instances", nil, body, &in); err != nil {
		return err
	}
	return finish(ctx, o.F, c, in, o.Wait, wait.Settled)
}

func finish(ctx context.Context, f *cmdutil.Factory, c *api.Client, in api.Object, w WaitFlags, goal wait.Goal) error {
	last, err := w.Follow(ctx, f, c, api.Path("instances", in.Str("id")), goal)
	if last != nil {
		in = last
	}
	if err != nil {
		return err
	}
	if goal == wait.Gone && w.Wait {
		return nil
	}
	return PrintList(f, []api.Object{in}, true)
}

// ListOptions are `instances`'s inputs.
type ListOptions struct {
	F   *cmdutil.Factory
	All bool
}

// NewList builds `instances`.
func NewList(f *cmdutil.Factory, run func(context.Context, *ListOptions) error) *cobra.Command {
	o := &ListOptions{F: f}
	if run == nil {
		run = List
	}
	cmd := &cobra.Command{
		Use: "instances", Aliases: []string{"instance", "si"}, Short: "List service instances", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().BoolVarP(&o.All, "all-namespaces", "A", false, "list the instances of every namespace")
	return cmd
}

// List prints the instances of the namespace.
func List(ctx context.Context, o *ListOptions) error {
	if err := output.Check(o.F.Output); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	q := o.F.NSQuery()
	if o.All {
		q = nil
	}
	items, err := c.List(ctx, "/instances", q)
	if err != nil {
		return err
	}
	return PrintList(o.F, items, false)
}

// PrintList prints instances as a table, or the list (or the one object)
// as JSON or YAML.
func PrintList(f *cmdutil.Factory, items []api.Object, one bool) error {
	var v any = map[string]any{"items": items}
	if one && len(items) == 1 {
		v = items[0]
	}
	if ok, err := output.Structured(f.IO.Out, f.Output, v); ok {
		return err
	}
	rows := make([][]string, 0, len(items))
	for _, in := range items {
		rows = append(rows, []string{in.Str("namespace"), in.Str("name"), in.Str("spec", "clusterServiceClassExternalName"),
			in.Str("spec", "clusterServicePlanExternalName"), Status(in)})
	}
	return output.Table(f.IO.Out, []string{"NAMESPACE", "NAME", "CLASS", "PLAN", "STATUS"}, rows)
}

// Status is an object's state in a word or two: the operation under way,
// Failed, Deleting, or the Ready condition's reason.
func Status(o api.Object) string {
	if op := o.Str("status", "currentOperation"); op != "" {
		return op + " in progress"
	}
	if o.Condition("Failed").Str("status") == "True" {
		return "Failed"
	}
	if o.Str("deletionTimestamp") != "" {
		return "Deleting"
	}
	if r := o.Condition("Ready"); r != nil {
		return output.Or(r.Str("reason"))
	}
	return "Pending"
}

// UpdateOptions are `update`'s inputs.
type UpdateOptions struct {
	F          *cmdutil.Factory
	Name       string
	Plan       string
	Params     []string
	ParamsJSON string
	Wait       WaitFlags
}

// NewUpdate builds `update NAME [-p PLAN] [--param k=v]`.
func NewUpdate(f *cmdutil.Factory, run func(context.Context, *UpdateOptions) error) *cobra.Command {
	o := &UpdateOptions{F: f}
	if run == nil {
		run = Update
	}
	cmd := &cobra.Command{
		Use: "update NAME [-p PLAN] [--param KEY=VALUE]", Short: "Change an instance's plan or parameters", Args: cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.Completer(f, "/instances", true, nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Plan, "plan", "p", "", "the new plan (its external name)")
	fl.StringArrayVar(&o.Params, "param", nil, "a parameter KEY=VALUE to set (repeatable; KEY=null removes it)")
	fl.StringVar(&o.ParamsJSON, "params-json", "", "parameters to merge, as a JSON object, or @FILE")
	o.Wait.Add(cmd)
	_ = cmd.RegisterFlagCompletionFunc("plan", cmdutil.Completer(f, "/serviceplans", false, nil))
	return cmd
}

// Update sends a merge patch of the plan and parameters.
func Update(ctx context.Context, o *UpdateOptions) error {
	params, err := cmdutil.Params(o.Params, o.ParamsJSON)
	if err != nil {
		return err
	}
	if o.Plan == "" && params == nil {
		return cmdutil.Usagef("nothing to change: give -p PLAN, --param KEY=VALUE or --params-json")
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	spec := map[string]any{}
	if o.Plan != "" {
		spec["clusterServicePlanExternalName"] = o.Plan
	}
	if params != nil {
		spec["parameters"] = params
	}
	var in api.Object
	if err := c.Do(ctx, http.MethodPatch, api.Path("instances", o.Name), o.F.NSQuery(), map[string]any{"spec": spec}, &in); err != nil {
		return err
	}
	return finish(ctx, o.F, c, in, o.Wait, wait.Settled)
}

// DeprovisionOptions are `deprovision`'s inputs.
type DeprovisionOptions struct {
	F    *cmdutil.Factory
	Name string
	Wait WaitFlags
}

// NewDeprovision builds `deprovision NAME`.
func NewDeprovision(f *cmdutil.Factory, run func(context.Context, *DeprovisionOptions) error) *cobra.Command {
	o := &DeprovisionOptions{F: f}
	if run == nil {
		run = Deprovision
	}
	cmd := &cobra.Command{
		Use: "deprovision NAME", Short: "Delete a service instance (its bindings first)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.Completer(f, "/instances", true, nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
	o.Wait.Add(cmd)
	return cmd
}

// Deprovision deletes the instance and, with --wait, waits until it is gone.
func Deprovision(ctx context.Context, o *DeprovisionOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	var in api.Object
	if err := c.Do(ctx, http.MethodDelete, api.Path("instances", o.Name), o.F.NSQuery(), nil, &in); err != nil {
		return err
	}
	if !o.Wait.Wait {
		fmt.Fprintf(o.F.IO.ErrOut, "instance %s/%s is being deprovisioned\n", o.F.NS(), o.Name)
	}
	return finish(ctx, o.F, c, in, o.Wait, wait.Gone)
}
