// Package quota is `bindery quota get|set|delete` and `bindery quota
// visibility`: what a namespace may take (instances, bindings, instances
// of a plan, paid plans) and how much of it is used, and which namespaces
// see a cluster plan. Setting needs an admin token for all namespaces;
// `get -n NS` needs a token of the namespace.
package quota

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// Quota is the REST API's quota object.
type Quota struct {
	Namespace string      `json:"namespace"`
	Instances *int        `json:"instances,omitempty"`
	Bindings  *int        `json:"bindings,omitempty"`
	PaidPlans bool        `json:"paidPlans"`
	Plans     []PlanQuota `json:"plans,omitempty"`
}

// PlanQuota bounds the instances of one plan.
type PlanQuota struct {
	PlanID    string `json:"planID,omitempty"`
	Class     string `json:"class,omitempty"`
	Plan      string `json:"plan,omitempty"`
	Instances int    `json:"instances"`
}

// Usage is the REST API's quota usage of a namespace.
type Usage struct {
	Namespace      string  `json:"namespace"`
	Quota          *Quota  `json:"quota,omitempty"`
	ResourceQuotas []any   `json:"resourceQuotas,omitempty"`
	Instances      Count   `json:"instances"`
	Bindings       Count   `json:"bindings"`
	Brokers        Count   `json:"brokers"`
	Plans          []Count `json:"plans,omitempty"`
}

// Count is a count and its limit; for a plan, Instances is the limit.
type Count struct {
	Used      int64  `json:"used"`
	Limit     *int64 `json:"limit,omitempty"`
	Source    string `json:"source,omitempty"`
	Class     string `json:"class,omitempty"`
	Plan      string `json:"plan,omitempty"`
	Instances int64  `json:"instances,omitempty"`
}

// defaultPath is how the REST API names the default quota.
const defaultPath = "_default"

// Options are the inputs of the quota commands.
type Options struct {
	F *cmdutil.Factory
	// Default works on the default quota instead of -n's namespace's.
	Default bool
	// Instances, Bindings and Paid are what set changes, when set.
	Instances, Bindings limit
	Paid                *bool
	// Plans are set's --plan CLASS/PLAN=N|none, in order.
	Plans []planLimit
}

// NewCmd builds `quota` with get, set, delete and visibility.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use: "quota", Aliases: []string{"quotas"}, Short: "Show and set what a namespace may take",
		Long: "Show and set what a namespace may take: instances, bindings, instances of a plan, and paid plans.\n" +
			"The default quota (--default) holds for every namespace without one of its own; the namespace's\n" +
			"Kubernetes ResourceQuotas on count/serviceinstances.servicecatalog.k8s.io and\n" +
			"count/servicebindings.servicecatalog.k8s.io limit it too, and the strictest limit wins.",
	}
	cmd.AddCommand(newGet(f, nil), newSet(f, nil), newDelete(f), newVisibility(f, nil))
	return cmd
}

func newGet(f *cmdutil.Factory, run func(context.Context, *Options) error) *cobra.Command {
	o := &Options{F: f}
	if run == nil {
		run = Get
	}
	cmd := &cobra.Command{
		Use: "get [-n NAMESPACE | --default]", Short: "Show what limits a namespace and how much of it is used", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().BoolVar(&o.Default, "default", false, "the default quota, for namespaces without their own")
	return cmd
}

// Get prints a namespace's limits and usage, or the default quota.
func Get(ctx context.Context, o *Options) error {
	if err := output.Check(o.F.Output); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	if o.Default {
		var q Quota
		if err := c.Do(ctx, http.MethodGet, "/quotas/"+defaultPath, nil, nil, &q); err != nil {
			if api.NotFound(err) {
				return fmt.Errorf("there is no default quota: namespaces without their own are not limited (set one with `bindery quota set --default`)")
			}
			return err
		}
		return printQuota(o, &q)
	}
	return printUsage(ctx, o, c)
}

// printUsage prints what limits -n's namespace and how much is used.
func printUsage(ctx context.Context, o *Options, c *api.Client) error {
	var u Usage
	if err := c.Do(ctx, http.MethodGet, "/quotas/"+url.PathEscape(o.F.NS())+"/usage", nil, nil, &u); err != nil {
		return err
	}
	if ok, err := output.Structured(o.F.IO.Out, o.F.Output, u); ok {
		return err
	}
	rows := [][]string{
		{"instances", strconv.FormatInt(u.Instances.Used, 10), limitText(u.Instances.Limit), source(u.Instances.Source, u.Namespace)},
		{"bindings", strconv.FormatInt(u.Bindings.Used, 10), limitText(u.Bindings.Limit), source(u.Bindings.Source, u.Namespace)},
		{"brokers", strconv.FormatInt(u.Brokers.Used, 10), limitText(u.Brokers.Limit), source(u.Brokers.Source, u.Namespace)},
	}
	from := "-"
	paid := "allowed"
	if u.Quota != nil {
		from = source(map[bool]string{true: "default", false: "namespace"}[u.Quota.Namespace == ""], u.Namespace)
		if !u.Quota.PaidPlans {
			paid = "not allowed"
		}
	}
	rows = append(rows, []string{"paid plans", "-", paid, from})
	for _, p := range u.Plans {
		rows = append(rows, []string{"instances of " + p.Class + "/" + p.Plan, strconv.FormatInt(p.Used, 10), strconv.FormatInt(p.Instances, 10), from})
	}
	return output.Table(o.F.IO.Out, o.F.IO.OutTerm, []string{"NAMESPACE " + u.Namespace, "USED", "LIMIT", "SET BY"}, rows)
}

// printQuota prints a quota's limits.
func printQuota(o *Options, q *Quota) error {
	if ok, err := output.Structured(o.F.IO.Out, o.F.Output, q); ok {
		return err
	}
	paid := "allowed"
	if !q.PaidPlans {
		paid = "not allowed"
	}
	rows := [][]string{{"instances", intText(q.Instances)}, {"bindings", intText(q.Bindings)}, {"paid plans", paid}}
	for _, p := range q.Plans {
		rows = append(rows, []string{"instances of " + p.Class + "/" + p.Plan, strconv.Itoa(p.Instances)})
	}
	title := "DEFAULT QUOTA"
	if q.Namespace != "" {
		title = "QUOTA OF " + q.Namespace
	}
	return output.Table(o.F.IO.Out, o.F.IO.OutTerm, []string{title, "LIMIT"}, rows)
}

// source says who set a limit, in words.
func source(s, ns string) string {
	switch {
	case s == "":
		return "-"
	case s == "namespace":
		return "quota of " + ns
	case s == "default":
		return "default quota"
	case strings.HasPrefix(s, "ResourceQuota/"):
		return "ResourceQuota " + strings.TrimPrefix(s, "ResourceQuota/")
	case s == "server":
		return "--max-brokers-per-namespace"
	}
	return s
}

func limitText(n *int64) string {
	if n == nil {
		return "none"
	}
	return strconv.FormatInt(*n, 10)
}

func intText(n *int) string {
	if n == nil {
		return "none"
	}
	return strconv.Itoa(*n)
}

func newDelete(f *cmdutil.Factory) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use: "delete [-n NAMESPACE | --default]", Short: "Remove a namespace's quota (the default quota then holds for it)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.F.Client()
			if err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), http.MethodDelete, "/quotas/"+url.PathEscape(o.path()), nil, nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(o.F.IO.ErrOut, "%s removed\n", o.name())
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.Default, "default", false, "the default quota, for namespaces without their own")
	return cmd
}

// path is the REST API's name of the quota the command works on.
func (o *Options) path() string {
	if o.Default {
		return defaultPath
	}
	return o.F.NS()
}

// name says which quota the command works on, in words.
func (o *Options) name() string {
	if o.Default {
		return "the default quota"
	}
	return "the quota of namespace " + o.F.NS()
}

// sortPlans orders a quota's plans by class and plan.
func sortPlans(plans []PlanQuota) {
	slices.SortFunc(plans, func(a, b PlanQuota) int {
		return strings.Compare(a.Class+"/"+a.Plan, b.Class+"/"+b.Plan)
	})
}
