package quota

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// Visibility is the REST API's plan visibility.
type Visibility struct {
	Restricted bool     `json:"restricted"`
	Namespaces []string `json:"namespaces"`
}

// VisibilityOptions are the inputs of `quota visibility`.
type VisibilityOptions struct {
	F *cmdutil.Factory
	// Plan is CLASS/PLAN, the external names of a cluster class and plan.
	Plan string
	// Namespaces, when set, are the only namespaces to see it (--none:
	// none); All makes it every namespace's again.
	Namespaces []string
	None, All  bool
}

func newVisibility(f *cmdutil.Factory, run func(context.Context, *VisibilityOptions) error) *cobra.Command {
	o := &VisibilityOptions{F: f}
	if run == nil {
		run = SetVisibility
	}
	cmd := &cobra.Command{
		Use:   "visibility CLASS/PLAN [--namespaces NS,... | --none | --all]",
		Short: "Show or choose the namespaces that see a cluster plan",
		Long: "Show or choose the namespaces that see a cluster plan (Cloud Foundry's service plan visibility).\n" +
			"To the other namespaces the plan does not exist: it is not listed, and an instance there that names it\n" +
			"waits for it, as for a plan no broker offers. Choosing needs an admin token for all namespaces.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Plan = args[0]
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&o.Namespaces, "namespaces", nil, "the only namespaces that see the plan")
	fl.BoolVar(&o.None, "none", false, "no namespace sees the plan (only tokens for all namespaces)")
	fl.BoolVar(&o.All, "all", false, "every namespace sees the plan again")
	cmd.MarkFlagsMutuallyExclusive("namespaces", "none", "all")
	return cmd
}

// SetVisibility shows the plan's visibility, after changing it when asked.
func SetVisibility(ctx context.Context, o *VisibilityOptions) error {
	if err := output.Check(o.F.Output); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	class, plan, ok := strings.Cut(o.Plan, "/")
	if !ok || class == "" || plan == "" {
		return cmdutil.Usagef("%q: name the plan as CLASS/PLAN, the external names of a cluster class and plan", o.Plan)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	plans, err := c.List(ctx, "/serviceplans", url.Values{"class": {class}, "name": {plan}})
	if err != nil {
		return err
	}
	if len(plans) != 1 {
		return &api.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("the cluster's service class %q offers no plan %q", class, plan)}
	}
	path := "/serviceplans/" + url.PathEscape(plans[0].Str("id")) + "/visibility"
	var v Visibility
	switch {
	case o.All:
		err = c.Do(ctx, http.MethodDelete, path, nil, nil, &v)
	case o.None || o.Namespaces != nil:
		ns := o.Namespaces
		if ns == nil {
			ns = []string{}
		}
		err = c.Do(ctx, http.MethodPut, path, nil, map[string]any{"namespaces": ns}, &v)
	default:
		err = c.Do(ctx, http.MethodGet, path, nil, nil, &v)
	}
	if err != nil {
		return err
	}
	if ok, err := output.Structured(o.F.IO.Out, o.F.Output, v); ok {
		return err
	}
	seen := "every namespace"
	switch {
	case v.Restricted && len(v.Namespaces) == 0:
		seen = "no namespace"
	case v.Restricted:
		seen = strings.Join(v.Namespaces, ", ")
	}
	return output.Table(o.F.IO.Out, o.F.IO.OutTerm, []string{"PLAN", "VISIBLE TO"}, [][]string{{class + "/" + plan, seen}})
}
