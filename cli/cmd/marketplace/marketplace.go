// Package marketplace is `bindery marketplace [-c CLASS] [-n NAMESPACE]`.
package marketplace

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
	"github.com/bindery-dev/bindery/internal/message"
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
		Use: "marketplace [-c CLASS] [-n NAMESPACE]", Aliases: []string{"m"}, Short: "List the service classes and plans on offer", Args: cobra.NoArgs,
		Long: "List the service classes and plans on offer: the cluster's brokers', and with -n NAMESPACE also those of\n" +
			"that namespace's own brokers (`bindery brokers register -n`), which only that namespace may provision.",
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().StringVarP(&o.Class, "class", "c", "", "show the plans of this class (the cluster's, else the namespace's of -n)")
	_ = cmd.RegisterFlagCompletionFunc("class", cmdutil.Completers(
		cmdutil.Completer(f, "/serviceclasses", false, nil),
		cmdutil.Completer(f, "/serviceclasses", false, f.ScopeCompletion)))
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
		return classPlans(ctx, o, c)
	}
	classes, plans, err := offer(ctx, c, o.F)
	if err != nil {
		return err
	}
	if ok, err := output.Structured(o.F.IO.Out, o.F.Output, map[string]any{"classes": classes, "plans": plans}); ok {
		return err
	}
	// A class's plans, by the class's namespace and object name: a
	// namespace's broker may offer a class of the same name as the
	// cluster's.
	byClass := map[[2]string][]string{}
	for _, p := range plans {
		k := [2]string{p.Str("namespace"), classRef(p)}
		byClass[k] = append(byClass[k], p.Str("spec", "externalName"))
	}
	header := []string{"CLASS", "PLANS", "BROKER", "DESCRIPTION"}
	if o.F.Namespace != "" {
		header = []string{"CLASS", "PLANS", "BROKER", "NAMESPACE", "DESCRIPTION"}
	}
	rows := make([][]string, 0, len(classes))
	for _, cl := range classes {
		row := []string{cl.Str("spec", "externalName"), output.Or(strings.Join(byClass[[2]string{cl.Str("namespace"), cl.Str("name")}], ", ")), brokerOf(cl)}
		if o.F.Namespace != "" {
			row = append(row, output.Or(cl.Str("namespace")))
		}
		rows = append(rows, append(row, cl.Str("spec", "description")))
	}
	return output.Table(o.F.IO.Out, o.F.IO.OutTerm, header, rows)
}

// offer lists the cluster's classes and plans (those the namespace of -n
// sees) and, with -n, that namespace's own after them.
func offer(ctx context.Context, c *api.Client, f *cmdutil.Factory) (classes, plans []api.Object, err error) {
	scopes := []url.Values{nil}
	if scope := f.ScopeQuery(); scope != nil {
		scopes = append(scopes, scope)
	}
	for i, q := range scopes {
		cl, err := c.List(ctx, "/serviceclasses", q)
		if err != nil {
			return nil, nil, err
		}
		pq := q
		if i == 0 {
			pq = f.VisibleIn(nil)
		}
		pl, err := c.List(ctx, "/serviceplans", pq)
		if err != nil {
			return nil, nil, err
		}
		classes, plans = append(classes, cl...), append(plans, pl...)
	}
	return classes, plans, nil
}

// classPlans prints the plans of o.Class: the cluster's class of that
// name, else the namespace's (as `bindery provision` chooses).
func classPlans(ctx context.Context, o *Options, c *api.Client) error {
	scopes := []url.Values{{}}
	if q := o.F.ScopeQuery(); q != nil {
		scopes = append(scopes, q)
	}
	var plans []api.Object
	var notFound error
	found := false
	for i, scope := range scopes {
		q := url.Values{"class": {o.Class}}
		if i == 0 {
			q = o.F.VisibleIn(q)
		}
		for k, v := range scope {
			q[k] = v
		}
		var err error
		if plans, err = c.List(ctx, "/serviceplans", q); err != nil {
			return err
		}
		if len(plans) > 0 {
			found = true
			break
		}
		// Tell a class without plans from a class that does not exist.
		if _, err := c.Get(ctx, api.Path("serviceclasses", o.Class), scope); err == nil {
			found = true
			break
		} else if notFound == nil {
			notFound = err
		}
		delete(q, "class")
		delete(q, "visibleIn") // of plans only
		q.Set("name", o.Class)
		if classes, err := c.List(ctx, "/serviceclasses", q); err == nil && len(classes) > 0 {
			found = true
			break
		}
	}
	if !found {
		if !api.NotFound(notFound) {
			return notFound
		}
		return noSuchClass(ctx, o, c)
	}
	if ok, err := output.Structured(o.F.IO.Out, o.F.Output, map[string]any{"items": plans}); ok {
		return err
	}
	rows := make([][]string, 0, len(plans))
	for _, p := range plans {
		rows = append(rows, []string{p.Str("spec", "externalName"), strconv.FormatBool(p.Bool("spec", "free")), p.Str("spec", "description")})
	}
	return output.Table(o.F.IO.Out, o.F.IO.OutTerm, []string{"PLAN", "FREE", "DESCRIPTION"}, rows)
}

// classRef is the object name of a plan's class, in either scope.
func classRef(p api.Object) string {
	if n := p.Str("spec", "clusterServiceClassRef", "name"); n != "" {
		return n
	}
	return p.Str("spec", "serviceClassRef", "name")
}

// brokerOf is the name of a class's broker, in either scope.
func brokerOf(cl api.Object) string {
	if n := cl.Str("spec", "clusterServiceBrokerName"); n != "" {
		return n
	}
	return cl.Str("spec", "serviceBrokerName")
}

// noSuchClass says that no broker offers the class, with the nearest
// name on offer.
func noSuchClass(ctx context.Context, o *Options, c *api.Client) error {
	classes, _, err := offer(ctx, c, o.F)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(classes))
	for _, cl := range classes {
		names = append(names, cl.Str("spec", "externalName"))
	}
	return &cmdutil.NotFoundError{Msg: fmt.Sprintf("No broker offers a service class named %q.%s `bindery marketplace` lists the classes on offer.",
		o.Class, message.DidYouMean(o.Class, names))}
}
