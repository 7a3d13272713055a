// Package export is `bindery export instances|bindings|brokers [-n
// NAMESPACE] [-l SELECTOR]`: every object of a kind, as newline-delimited
// JSON on stdout, streamed from one snapshot of the catalog.
package export

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
)

// Options are export's inputs.
type Options struct {
	F *cmdutil.Factory
	// Kind is instances, bindings or brokers.
	Kind     string
	Selector string
}

// kinds are what can be exported, and what one of each is called.
var kinds = map[string]string{"instances": "instance", "bindings": "binding", "brokers": "broker"}

// NewCmd builds the command.
func NewCmd(f *cmdutil.Factory, run func(context.Context, *Options) error) *cobra.Command {
	o := &Options{F: f}
	if run == nil {
		run = Run
	}
	cmd := &cobra.Command{
		Use:   "export instances|bindings|brokers [-n NAMESPACE] [-l SELECTOR]",
		Short: "Write every instance, binding or broker as JSON, one a line",
		Long: "Write every instance, binding or broker the token may read to stdout as newline-delimited JSON, one object\n" +
			"a line (the objects the lists show), read from one snapshot of the catalog: `bindery export instances > all.ndjson`.\n" +
			"Without -n, instances and bindings of every namespace the token may read, and the cluster's brokers;\n" +
			"with -n, that namespace's. An export cut short by the server is an error (exit 1): what was written is not all of it.",
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return slices.Sorted(maps.Keys(kinds)), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Kind = args[0]
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "only objects whose labels match this label selector (team=a,tier in (db,cache))")
	return cmd
}

// Run writes the export to stdout as it arrives, and how many objects it
// held to stderr.
func Run(ctx context.Context, o *Options) error {
	one, ok := kinds[o.Kind]
	if !ok {
		return cmdutil.Usagef("%q cannot be exported: export instances, bindings or brokers", o.Kind)
	}
	if o.F.Output != "" {
		return cmdutil.Usagef("export writes JSON, one object a line: -o does not apply")
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	q := url.Values{}
	if o.F.Namespace != "" {
		q.Set("namespace", o.F.Namespace)
	}
	if o.Selector != "" {
		q.Set("labelSelector", o.Selector)
	}
	n, rev, err := c.Export(ctx, "/export/"+o.Kind, q, o.F.IO.Out)
	if err != nil {
		return err
	}
	noun := o.Kind
	if n == 1 {
		noun = one
	}
	fmt.Fprintf(o.F.IO.ErrOut, "%d %s exported (revision %s)\n", n, noun, rev)
	return nil
}
