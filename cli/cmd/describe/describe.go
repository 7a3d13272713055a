// Package describe is `bindery describe instance|binding|broker NAME`: the
// object, its conditions and its history. With -n, an instance or binding
// of that namespace (default "default"), a broker of that namespace's own
// (default: the cluster's).
package describe

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/cmd/instance"
	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
	"github.com/bindery-dev/bindery/internal/message"
)

// kinds maps the words the command accepts to the API's collections.
var kinds = map[string]string{
	"instance": "instances", "instances": "instances", "si": "instances",
	"binding": "bindings", "bindings": "bindings", "sb": "bindings",
	"broker": "brokers", "brokers": "brokers",
}

// Options are describe's inputs.
type Options struct {
	F          *cmdutil.Factory
	Kind, Name string
}

// NewCmd builds the command.
func NewCmd(f *cmdutil.Factory, run func(context.Context, *Options) error) *cobra.Command {
	o := &Options{F: f}
	if run == nil {
		run = Run
	}
	return &cobra.Command{
		Use:   "describe instance|binding|broker NAME",
		Short: "Show an object, its conditions and its history",
		Args:  cobra.ExactArgs(2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return []cobra.Completion{"instance", "binding", "broker"}, cobra.ShellCompDirectiveNoFileComp
			case 1:
				if coll, ok := kinds[args[0]]; ok && coll == "brokers" {
					return cmdutil.Completer(f, "/brokers", false, f.ScopeCompletion)(cmd, args, toComplete)
				} else if ok {
					return cmdutil.Completer(f, "/"+coll, true, nil)(cmd, args, toComplete)
				}
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Kind, o.Name = args[0], args[1]
			return run(cmd.Context(), o)
		},
	}
}

// Run reads the object and its events and prints them.
func Run(ctx context.Context, o *Options) error {
	coll, ok := kinds[o.Kind]
	if !ok {
		return cmdutil.Usagef("%q: want instance, binding or broker", o.Kind)
	}
	if err := output.Check(o.F.Output); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	q := o.F.NSQuery()
	if coll == "brokers" {
		q = o.F.ScopeQuery()
	}
	obj, err := c.Get(ctx, api.Path(coll, o.Name), q)
	if err != nil && coll != "brokers" {
		return api.HintNotFound(err, cmdutil.ByName(coll))
	} else if err != nil {
		return err
	}
	var events struct {
		Items []api.Object `json:"items"`
	}
	// A broker's id is looked up in its scope too.
	if err := c.Do(ctx, "GET", api.Path(coll, obj.Str("id"), "events"), q, nil, &events); err != nil {
		return err
	}
	var bindings []api.Object
	if coll == "instances" {
		all, err := c.List(ctx, "/bindings", o.F.NSQuery())
		if err != nil {
			return err
		}
		for _, b := range all {
			if b.Str("spec", "instanceRef", "name") == obj.Str("name") {
				bindings = append(bindings, b)
			}
		}
	}
	doc := map[string]any{"object": obj, "events": events.Items}
	if coll == "instances" {
		doc["bindings"] = bindings
	}
	if ok, err := output.Structured(o.F.IO.Out, o.F.Output, doc); ok {
		return err
	}
	w := o.F.IO.Out
	// describe is for people: aligned even in a pipe, cut only on a terminal.
	term := output.Term{On: true}
	if o.F.IO.OutTerm.On {
		term.Width = o.F.IO.OutTerm.Width
	}
	fields(w, coll, obj)
	conditions(w, term, obj)
	if coll == "instances" {
		fmt.Fprintln(w, "\nBindings:")
		if len(bindings) == 0 {
			fmt.Fprintln(w, "  (none)")
		} else {
			rows := make([][]string, 0, len(bindings))
			for _, b := range bindings {
				rows = append(rows, []string{"  " + b.Str("name"), output.Or(b.Str("spec", "secretName")), instance.Status(b)})
			}
			if err := output.Table(w, term, []string{"  NAME", "SECRET", "STATUS"}, rows); err != nil {
				return err
			}
		}
	}
	return history(w, term, events.Items)
}

// fields prints the object's fields, one per line, each made safe.
func fields(w io.Writer, coll string, obj api.Object) {
	field := func(k, v string) {
		if v != "" && k != "" {
			k += ":"
		}
		if v != "" {
			fmt.Fprintf(w, "%-14s %s\n", k, output.SafeLine(v))
		}
	}
	field("Name", obj.Str("name"))
	field("Namespace", obj.Str("namespace"))
	field("ID", obj.Str("id"))
	switch coll {
	case "instances":
		field("Class", obj.Str("spec", "clusterServiceClassExternalName"))
		field("Plan", obj.Str("spec", "clusterServicePlanExternalName"))
		field("Class", obj.Str("spec", "serviceClassExternalName"))
		field("Plan", obj.Str("spec", "servicePlanExternalName"))
		field("Dashboard", obj.Str("status", "dashboardURL"))
	case "bindings":
		field("Instance", obj.Str("spec", "instanceRef", "name"))
		field("Secret", obj.Str("spec", "secretName"))
	case "brokers":
		field("URL", obj.Str("spec", "url"))
		field("Last fetch", obj.Str("status", "lastCatalogRetrievalTime"))
	}
	if coll != "brokers" {
		field("Status", statusWord(obj))
		if msg := obj.Str("progress", "message"); msg != "" {
			field("", msg)
		}
	}
	field("Created", obj.Str("creationTimestamp"))
	field("Deleting since", obj.Str("deletionTimestamp"))
	field("Last error", obj.Str("status", "lastError"))
	if p, ok := obj.Get("spec", "parameters").(map[string]any); ok && len(p) > 0 {
		var keys []string
		for k := range p {
			keys = append(keys, k)
		}
		field("Parameters", strings.Join(slices.Sorted(slices.Values(keys)), ", "))
	}
}

// history prints the object's history, reasons in words.
func history(w io.Writer, term output.Term, events []api.Object) error {
	fmt.Fprintln(w, "\nHistory:")
	if len(events) == 0 {
		fmt.Fprintln(w, "  (none)")
		return nil
	}
	rows := make([][]string, 0, len(events))
	for _, e := range events {
		count := ""
		if n := e.Int("count"); n > 1 {
			count = fmt.Sprintf("x%d", n)
		}
		rows = append(rows, []string{"  " + e.Str("time"), e.Str("type"), message.ReasonOf(e.Str("reason")).Word, count, e.Str("message")})
	}
	return output.Table(w, term, []string{"  TIME", "TYPE", "WHAT", "", "MESSAGE"}, rows)
}

func conditions(w io.Writer, term output.Term, obj api.Object) {
	list, _ := obj.Get("status", "conditions").([]any)
	if len(list) == 0 {
		return
	}
	fmt.Fprintln(w, "\nConditions:")
	rows := make([][]string, 0, len(list))
	for _, c := range list {
		m, _ := c.(map[string]any)
		o := api.Object(m)
		why := "-"
		if r := o.Str("reason"); r != "" {
			why = message.ReasonOf(r).Word
		}
		rows = append(rows, []string{"  " + o.Str("type"), o.Str("status"), why, o.Str("message")})
	}
	_ = output.Table(w, term, []string{"  TYPE", "STATUS", "WHY", "MESSAGE"}, rows)
}

// statusWord is the object's state in a word: the server's progress when
// it sent one (Blocked, Failed, Retrying, Waiting), else what its
// conditions say.
func statusWord(obj api.Object) string {
	switch st := message.State(obj.Str("progress", "state")); st {
	case message.Blocked, message.Failed, message.Retrying, message.Waiting:
		return message.Capitalise(string(st))
	}
	return instance.Status(obj)
}
