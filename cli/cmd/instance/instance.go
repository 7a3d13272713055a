// Package instance is `bindery provision`, `instances`, `update` and
// `deprovision`.
package instance

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/wait"
	"github.com/bindery-dev/bindery/internal/message"
)

// ProvisionOptions are `provision`'s inputs.
type ProvisionOptions struct {
	F           *cmdutil.Factory
	Name        string
	Class, Plan string
	// Scope is where the class and plan are: "cluster", "namespace" (the
	// instance's), or "" to look (the cluster's, else the namespace's).
	Scope  string
	Params cmdutil.ParamFlags
	Wait   cmdutil.WaitFlags
	// AllowMissing records an instance of a class or plan no broker
	// offers (yet), to wait for it, instead of refusing it.
	AllowMissing bool
}

// The scopes of --scope.
const (
	ScopeCluster   = "cluster"
	ScopeNamespace = "namespace"
)

// NewProvision builds `provision NAME -c CLASS -p PLAN`.
func NewProvision(f *cmdutil.Factory, run func(context.Context, *ProvisionOptions) error) *cobra.Command {
	o := &ProvisionOptions{F: f}
	if run == nil {
		run = Provision
	}
	cmd := &cobra.Command{
		Use:   "provision NAME -c CLASS -p PLAN",
		Short: "Create a service instance",
		Long: "Create a service instance in the namespace of -n (default \"default\") from a class and plan on offer\n" +
			"(`bindery marketplace -n NAMESPACE`). The class is the cluster's of that name; when no cluster broker\n" +
			"offers it, the namespace's own brokers' (`bindery brokers register -n`). --scope chooses one of them\n" +
			"instead, as when both offer a class of the same name.\n\n" +
			"A class or plan no broker offers is refused, with the nearest name on offer; --allow-missing records the\n" +
			"instance all the same, to wait until a broker offers it (as `kubectl apply` does).",
		Example: "  bindery provision orders-db -c postgresql -p small --param size=10 --wait\n" +
			"  bindery provision orders-db -c postgresql -p small --params-json @params.json\n" +
			"  bindery provision cache -n team-a -c redis -p one --scope namespace",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions, // a new name
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Class, "class", "c", "", "the service class: its external name, as the marketplace lists it")
	fl.StringVarP(&o.Plan, "plan", "p", "", "the plan (its external name)")
	cmdutil.EnumFlag(cmd, &o.Scope, "scope", "", []string{ScopeCluster, ScopeNamespace},
		"where the class is: cluster, or namespace (the instance's namespace's own brokers); by default the cluster's, else the namespace's")
	fl.BoolVar(&o.AllowMissing, "allow-missing", false, "record the instance even when no broker offers the class or plan yet; it waits for them")
	o.Params.Add(cmd, false)
	o.Wait.Add(cmd)
	_ = cmd.RegisterFlagCompletionFunc("class", cmdutil.Completers(
		cmdutil.Completer(f, "/serviceclasses", false, nil),
		cmdutil.Completer(f, "/serviceclasses", true, nil)))
	planQuery := func(cmd *cobra.Command) url.Values {
		if c, _ := cmd.Flags().GetString("class"); c != "" {
			return url.Values{"class": {c}}
		}
		return url.Values{}
	}
	_ = cmd.RegisterFlagCompletionFunc("plan", cmdutil.Completers(
		cmdutil.Completer(f, "/serviceplans", false, func(cmd *cobra.Command) url.Values { return f.VisibleIn(planQuery(cmd)) }),
		cmdutil.Completer(f, "/serviceplans", true, planQuery)))
	return cmd
}

// Provision creates the instance and, with --wait, follows it.
func Provision(ctx context.Context, o *ProvisionOptions) error {
	if o.Class == "" || o.Plan == "" {
		return cmdutil.Usagef("-c CLASS and -p PLAN are required: `bindery marketplace` lists them")
	}
	params, err := o.Params.Map()
	if err != nil {
		return err
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	scope := o.Scope
	if scope == "" {
		if scope, err = classScope(ctx, c, o.Class, o.F.NS()); err != nil {
			return err
		}
	}
	if !o.AllowMissing {
		if err := offered(ctx, c, o, scope); err != nil {
			return err
		}
	}
	spec := map[string]any{"clusterServiceClassExternalName": o.Class, "clusterServicePlanExternalName": o.Plan}
	if scope == ScopeNamespace {
		spec = map[string]any{"serviceClassExternalName": o.Class, "servicePlanExternalName": o.Plan}
	}
	if params != nil {
		spec["parameters"] = params
	}
	var in api.Object
	body := map[string]any{"name": o.Name, "namespace": o.F.NS(), "spec": spec}
	if err := c.Do(ctx, http.MethodPost, "/instances", nil, body, &in); err != nil {
		return err
	}
	cmdutil.Warn(o.F, in)
	return Kind.Finish(ctx, o.F, c, in, o.Wait, wait.Settled)
}

// offered checks that a broker offers the class and plan in scope, and
// refuses them otherwise with the nearest name on offer.
func offered(ctx context.Context, c *api.Client, o *ProvisionOptions, scope string) error {
	q := url.Values{}
	if scope == ScopeNamespace {
		q.Set("namespace", o.F.NS())
	}
	classes, err := api.ListOf[named](ctx, c, "/serviceclasses", q)
	if err != nil {
		return err
	}
	var class *named
	for i := range classes {
		if classes[i].Spec.ExternalName == o.Class || classes[i].Name == o.Class {
			class = &classes[i]
		}
	}
	if class == nil {
		return &cmdutil.NotFoundError{Msg: fmt.Sprintf("No broker offers a service class named %q%s.%s\n"+
			"`bindery marketplace%s` lists the classes on offer; --allow-missing records the instance to wait for it.",
			o.Class, where(scope, o.F.NS()), message.DidYouMean(o.Class, externalNames(classes)), nsOption(scope, o.F.NS()))}
	}
	q.Set("class", class.Name)
	if scope != ScopeNamespace {
		// A cluster plan hidden from the namespace is, there, a plan no
		// broker offers (plan visibility).
		q.Set("visibleIn", o.F.NS())
	}
	plans, err := api.ListOf[named](ctx, c, "/serviceplans", q)
	if err != nil {
		return err
	}
	for _, p := range plans {
		if p.Spec.ExternalName == o.Plan || p.Name == o.Plan {
			return nil
		}
	}
	return &cmdutil.NotFoundError{Msg: fmt.Sprintf("Service class %q has no plan named %q.%s\n"+
		"`bindery marketplace -c %s%s` lists its plans; --allow-missing records the instance to wait for it.",
		o.Class, o.Plan, message.DidYouMean(o.Plan, externalNames(plans)), o.Class, nsOption(scope, o.F.NS()))}
}

// named is what offered reads of a class or plan.
type named struct {
	Name string `json:"name"`
	Spec struct {
		ExternalName string `json:"externalName"`
	} `json:"spec"`
}

func externalNames(items []named) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Spec.ExternalName
	}
	return out
}

func where(scope, ns string) string {
	if scope == ScopeNamespace {
		return fmt.Sprintf(" in namespace %s", ns)
	}
	return ""
}

func nsOption(scope, ns string) string {
	if scope == ScopeNamespace {
		return " -n " + ns
	}
	return ""
}

// classScope finds where a class of this external (or object) name is
// offered: the cluster's brokers, else the namespace's own. A class no one
// offers yet is the cluster's, as before namespaced brokers: the instance
// waits for it.
func classScope(ctx context.Context, c *api.Client, class, namespace string) (string, error) {
	cluster, err := c.List(ctx, "/serviceclasses", url.Values{"name": {class}})
	if err != nil {
		return "", err
	}
	if len(cluster) > 0 {
		return ScopeCluster, nil
	}
	own, err := c.List(ctx, "/serviceclasses", url.Values{"name": {class}, "namespace": {namespace}})
	if err != nil {
		return "", fmt.Errorf("look for class %s in namespace %s: %w", class, namespace, err)
	}
	if len(own) > 0 {
		return ScopeNamespace, nil
	}
	return ScopeCluster, nil
}

// Kind is how the verbs list, follow and print instances.
var Kind = cmdutil.Kind{
	Plural: "instances", Singular: "instance",
	Header: []string{"NAMESPACE", "NAME", "CLASS", "PLAN", "STATUS"},
	Row: func(in api.Object) []string {
		var r row
		r.Namespace, r.Name = in.Str("namespace"), in.Str("name")
		r.Spec.Class, r.Spec.Plan = in.Str("spec", "clusterServiceClassExternalName"), in.Str("spec", "clusterServicePlanExternalName")
		r.Spec.NamespacedClass, r.Spec.NamespacedPlan = in.Str("spec", "serviceClassExternalName"), in.Str("spec", "servicePlanExternalName")
		r.State = StateOf(in)
		return r.cells()
	},
	Rows: cmdutil.RowsOf(row.cells),
}

// row is what the table of instances shows of one.
type row struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Spec      struct {
		Class           string `json:"clusterServiceClassExternalName"`
		Plan            string `json:"clusterServicePlanExternalName"`
		NamespacedClass string `json:"serviceClassExternalName"`
		NamespacedPlan  string `json:"servicePlanExternalName"`
	} `json:"spec"`
	State
}

func (r row) cells() []string {
	class, plan := r.Spec.Class, r.Spec.Plan
	if class == "" {
		class, plan = r.Spec.NamespacedClass, r.Spec.NamespacedPlan
	}
	return []string{r.Namespace, r.Name, class, plan, r.State.Word()}
}

// Namespaced tells whether an instance names a class and plan of its
// namespace's own brokers (the service… fields) rather than the cluster's.
func Namespaced(in api.Object) bool {
	for _, f := range []string{"serviceClassExternalName", "serviceClassExternalID", "serviceClassName", "serviceClassRef"} {
		if in.Get("spec", f) != nil {
			return true
		}
	}
	return false
}

// NewList builds `instances`.
func NewList(f *cmdutil.Factory) *cobra.Command {
	return Kind.NewList(f, "List service instances", "instance", "si")
}

// State is what Status reads of an instance or a binding; tables decode
// it straight from a list.
type State struct {
	DeletionTimestamp string `json:"deletionTimestamp"`
	Status            struct {
		CurrentOperation string      `json:"currentOperation"`
		Conditions       []Condition `json:"conditions"`
	} `json:"status"`
}

// Condition is the part of a status condition State reads.
type Condition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// StateOf reads an object's State.
func StateOf(o api.Object) State {
	var s State
	s.DeletionTimestamp = o.Str("deletionTimestamp")
	s.Status.CurrentOperation = o.Str("status", "currentOperation")
	list, _ := o.Get("status", "conditions").([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			c := api.Object(m)
			s.Status.Conditions = append(s.Status.Conditions, Condition{Type: c.Str("type"), Status: c.Str("status"), Reason: c.Str("reason")})
		}
	}
	return s
}

// Word is the state in a word or two: the operation under way, Failed,
// Deleting, or the Ready condition's reason.
func (s State) Word() string {
	if op := s.Status.CurrentOperation; op != "" {
		return message.Words(op) + " in progress"
	}
	if c, ok := s.condition("Failed"); ok && c.Status == "True" {
		return "Failed"
	}
	if s.DeletionTimestamp != "" {
		return "Deleting"
	}
	if c, ok := s.condition("Ready"); ok && c.Reason != "" {
		return message.ReasonOf(c.Reason).Word
	}
	return "Pending"
}

func (s State) condition(typ string) (Condition, bool) {
	for _, c := range s.Status.Conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

// Status is an object's state in a word or two (State.Word).
func Status(o api.Object) string { return StateOf(o).Word() }

// UpdateOptions are `update`'s inputs.
type UpdateOptions struct {
	F      *cmdutil.Factory
	Name   string
	Plan   string
	Params cmdutil.ParamFlags
	Wait   cmdutil.WaitFlags
}

// NewUpdate builds `update NAME [-p PLAN] [--param k=v]`.
func NewUpdate(f *cmdutil.Factory, run func(context.Context, *UpdateOptions) error) *cobra.Command {
	o := &UpdateOptions{F: f}
	if run == nil {
		run = Update
	}
	cmd := &cobra.Command{
		Use: "update NAME [-p PLAN] [--param KEY=VALUE]", Short: "Change an instance's plan or parameters", Args: cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.First(cmdutil.Completer(f, "/instances", true, nil)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Plan, "plan", "p", "", "the new plan (its external name)")
	o.Params.Add(cmd, true)
	o.Wait.Add(cmd)
	_ = cmd.RegisterFlagCompletionFunc("plan", cmdutil.Completer(f, "/serviceplans", false, func(*cobra.Command) url.Values { return f.VisibleIn(nil) }))
	return cmd
}

// Update sends a merge patch of the plan and parameters.
func Update(ctx context.Context, o *UpdateOptions) error {
	params, err := o.Params.Map()
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
		// The plan is named in the instance's own scope.
		current, err := c.Get(ctx, api.Path("instances", o.Name), o.F.NSQuery())
		if err != nil {
			return api.HintNotFound(err, cmdutil.ByName("instances"))
		}
		field := "clusterServicePlanExternalName"
		if Namespaced(current) {
			field = "servicePlanExternalName"
		}
		spec[field] = o.Plan
	}
	if params != nil {
		spec["parameters"] = params
	}
	var in api.Object
	if err := c.Do(ctx, http.MethodPatch, api.Path("instances", o.Name), o.F.NSQuery(), map[string]any{"spec": spec}, &in); err != nil {
		return api.HintNotFound(err, cmdutil.ByName("instances"))
	}
	cmdutil.Warn(o.F, in)
	return Kind.Finish(ctx, o.F, c, in, o.Wait, wait.Settled)
}

// NewDeprovision builds `deprovision NAME`.
func NewDeprovision(f *cmdutil.Factory) *cobra.Command {
	return Kind.NewDelete(f, "deprovision NAME", "Delete a service instance (its bindings first)", "deprovisioned",
		"whatever the broker created for it stays there until someone removes it there")
}
