// Package marketplace is `bindery marketplace [-c CLASS]`.
package marketplace

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// Options are marketplace's inputs.
type Options struct {
	F     *cmdutil.Factory
	Class string
}

// NewCmd builds the command.
func NewCmd(f *cmdutil.Factory, run func(context.Context, *Options) error) *cobra.Command {
	o := &Options{F: f}
	if run == nil {
		run = Run
	}
	cmd := &cobra.Command{
		Use: "marketplace [-c CLASS]", Aliases: []string{"m"}, Short: "List the service classes and plans on offer", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().StringVarP(&o.Class, "class", "c", "", "show the plans of this class")
	_ = cmd.RegisterFlagCompletionFunc("class", cmdutil.Completer(f, "/serviceclasses", false, nil))
	return cmd
}

// Run prints the classes with their plans, or one class's plans.
func Run(ctx context.Context, o *Options) error {
	if err := output.Check(o.F.Output); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	if o.Class != "" {
		plans, err := c.List(ctx, "/serviceplans", url.Values{"class": {o.Class}})
		if err != nil {
			return err
		}
		if len(plans) == 0 {
			// Tell a class without plans from a class that does not exist.
			if _, err := c.Get(ctx, api.Path("serviceclasses", o.Class), nil); err != nil {
				classes, lerr := c.List(ctx, "/serviceclasses", url.Values{"name": {o.Class}})
				if lerr != nil || len(classes) == 0 {
					return err
				}
			}
		}
		if ok, err := output.Structured(o.F.IO.Out, o.F.Output, map[string]any{"items": plans}); ok {
			return err
		}
		rows := make([][]string, 0, len(plans))
		for _, p := range plans {
			rows = append(rows, []string{p.Str("spec", "externalName"), strconv.FormatBool(p.Bool("spec", "free")), p.Str("spec", "description")})
		}
		return output.Table(o.F.IO.Out, []string{"PLAN", "FREE", "DESCRIPTION"}, rows)
	}
	classes, err := c.List(ctx, "/serviceclasses", nil)
	if err != nil {
		return err
	}
	plans, err := c.List(ctx, "/serviceplans", nil)
	if err != nil {
		return err
	}
	if ok, err := output.Structured(o.F.IO.Out, o.F.Output, map[string]any{"classes": classes, "plans": plans}); ok {
		return err
	}
	byClass := map[string][]string{}
	for _, p := range plans {
		k := p.Str("spec", "clusterServiceClassRef", "name")
		byClass[k] = append(byClass[k], p.Str("spec", "externalName"))
	}
	rows := make([][]string, 0, len(classes))
	for _, cl := range classes {
		rows = append(rows, []string{cl.Str("spec", "externalName"), output.Or(strings.Join(byClass[cl.Str("name")], ", ")),
			cl.Str("spec", "clusterServiceBrokerName"), cl.Str("spec", "description")})
	}
	return output.Table(o.F.IO.Out, []string{"CLASS", "PLANS", "BROKER", "DESCRIPTION"}, rows)
}
