package quota

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// limit is a flag of a count, or "none" for no limit; set says it was
// given.
type limit struct {
	set bool
	n   *int
}

func (l *limit) String() string {
	if !l.set {
		return ""
	}
	return intText(l.n)
}

func (l *limit) Set(s string) error {
	n, err := parseLimit(s)
	if err != nil {
		return err
	}
	l.set, l.n = true, n
	return nil
}

func (l *limit) Type() string { return "N|none" }

// parseLimit reads a count of at least 0, or "none".
func parseLimit(s string) (*int, error) {
	if s == "none" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 2147483647 {
		return nil, errors.New(`want a count from 0 to 2147483647, or "none"`)
	}
	return &n, nil
}

// planLimit is one --plan CLASS/PLAN=N|none.
type planLimit struct {
	class, plan string
	n           *int
}

// planFlag collects --plan flags.
type planFlag struct{ to *[]planLimit }

func (p planFlag) String() string { return "" }
func (p planFlag) Type() string   { return "CLASS/PLAN=N|none" }

func (p planFlag) Set(s string) error {
	name, count, ok := strings.Cut(s, "=")
	class, plan, ok2 := strings.Cut(name, "/")
	if !ok || !ok2 || class == "" || plan == "" {
		return errors.New("want CLASS/PLAN=N or CLASS/PLAN=none, the external names of a cluster class and plan")
	}
	n, err := parseLimit(count)
	if err != nil {
		return err
	}
	*p.to = append(*p.to, planLimit{class, plan, n})
	return nil
}

func newSet(f *cmdutil.Factory, run func(context.Context, *Options) error) *cobra.Command {
	o := &Options{F: f}
	if run == nil {
		run = Set
	}
	var paid bool
	cmd := &cobra.Command{
		Use:   "set [-n NAMESPACE | --default] [--instances N|none] [--bindings N|none] [--paid=false] [--plan CLASS/PLAN=N|none]...",
		Short: "Change what a namespace may take (an admin token for all namespaces)", Args: cobra.NoArgs,
		Long: "Change what a namespace (or, with --default, every namespace without a quota of its own) may take.\n" +
			"What is not given stays as it was; \"none\" lifts a limit. Objects over a lowered limit stay;\n" +
			"new ones are refused until there is room.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("paid") {
				o.Paid = &paid
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.Default, "default", false, "the default quota, for namespaces without their own")
	fl.Var(&o.Instances, "instances", "the most instances the namespace may have, or none")
	fl.Var(&o.Bindings, "bindings", "the most bindings the namespace may have, or none")
	fl.BoolVar(&paid, "paid", true, "whether the namespace may create instances of plans that are not free")
	fl.Var(planFlag{&o.Plans}, "plan", "the most instances of a cluster plan, as CLASS/PLAN=N, or CLASS/PLAN=none (repeat for more plans)")
	return cmd
}

// Set changes the quota: what the flags give, over what it was (paid
// plans allowed and nothing limited for a namespace without one).
func Set(ctx context.Context, o *Options) error {
	if err := output.Check(o.F.Output); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	if !o.Instances.set && !o.Bindings.set && o.Paid == nil && len(o.Plans) == 0 {
		return cmdutil.Usagef("nothing to change: give --instances, --bindings, --paid or --plan")
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	path := "/quotas/" + url.PathEscape(o.path())
	q := Quota{PaidPlans: true}
	if err := c.Do(ctx, http.MethodGet, path, nil, nil, &q); err != nil && !api.NotFound(err) {
		return err
	}
	o.apply(&q)
	var out Quota
	if err := c.Do(ctx, http.MethodPut, path, nil, request(&q), &out); err != nil {
		return err
	}
	fmt.Fprintf(o.F.IO.ErrOut, "%s is set\n", o.name())
	if o.Default {
		return printQuota(o, &out)
	}
	return printUsage(ctx, o, c)
}

// apply changes q as the flags say.
func (o *Options) apply(q *Quota) {
	if o.Instances.set {
		q.Instances = o.Instances.n
	}
	if o.Bindings.set {
		q.Bindings = o.Bindings.n
	}
	if o.Paid != nil {
		q.PaidPlans = *o.Paid
	}
	for _, p := range o.Plans {
		kept := q.Plans[:0]
		for _, have := range q.Plans {
			if have.Class != p.class || have.Plan != p.plan {
				kept = append(kept, have)
			}
		}
		q.Plans = kept
		if p.n != nil {
			q.Plans = append(q.Plans, PlanQuota{Class: p.class, Plan: p.plan, Instances: *p.n})
		}
	}
	sortPlans(q.Plans)
}

// request is the body of PUT /quotas/{namespace}: the quota without its
// namespace, its plans by id (those it had) or by name (those added).
func request(q *Quota) any {
	plans := make([]PlanQuota, len(q.Plans))
	for i, p := range q.Plans {
		plans[i] = PlanQuota{PlanID: p.PlanID, Instances: p.Instances}
		if p.PlanID == "" {
			plans[i].Class, plans[i].Plan = p.Class, p.Plan
		}
	}
	return struct {
		Instances *int        `json:"instances,omitempty"`
		Bindings  *int        `json:"bindings,omitempty"`
		PaidPlans bool        `json:"paidPlans"`
		Plans     []PlanQuota `json:"plans"`
	}{q.Instances, q.Bindings, q.PaidPlans, plans}
}
