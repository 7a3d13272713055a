package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/output"
	"github.com/bindery-dev/bindery/cli/internal/wait"
)

// Kind is a namespaced kind of the REST API (instances, bindings) as the
// verbs show it: where its objects are and their table, so that listing,
// following and printing them is written once.
type Kind struct {
	// Plural names the kind's path, /api/v1/PLURAL, and its list verb;
	// Singular names one object in messages.
	Plural, Singular string
	// Header and Row make its table.
	Header []string
	Row    func(api.Object) []string
	// Rows, when not nil, lists the objects for the table, decoding only
	// what it shows (RowsOf); the rows must be Row's.
	Rows func(ctx context.Context, c *api.Client, path string, query url.Values) ([][]string, error)
}

// RowsOf is a Kind's Rows that decodes each object as T, a struct of the
// fields the table shows, and makes its row with cells.
func RowsOf[T any](cells func(T) []string) func(context.Context, *api.Client, string, url.Values) ([][]string, error) {
	return func(ctx context.Context, c *api.Client, path string, q url.Values) ([][]string, error) {
		items, err := api.ListOf[T](ctx, c, path, q)
		if err != nil {
			return nil, err
		}
		rows := make([][]string, 0, len(items))
		for _, it := range items {
			rows = append(rows, cells(it))
		}
		return rows, nil
	}
}

// Print prints objects as a table, or as JSON or YAML: the list, or the
// object alone when one is asked for and there is one.
func (k Kind) Print(f *Factory, items []api.Object, one bool) error {
	if items == nil {
		items = []api.Object{}
	}
	var v any = map[string]any{"items": items}
	if one && len(items) == 1 {
		v = items[0]
	}
	if ok, err := output.Structured(f.IO.Out, f.Output, v); ok {
		return err
	}
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		rows = append(rows, k.Row(it))
	}
	return output.Table(f.IO.Out, f.IO.OutTerm, k.Header, rows)
}

// Finish ends a verb that changed obj: with --wait it follows the object
// to goal (a failed operation is the error), then prints it, unless it was
// waited for until gone.
func (k Kind) Finish(ctx context.Context, f *Factory, c *api.Client, obj api.Object, w WaitFlags, goal wait.Goal) error {
	last, err := w.Follow(ctx, f, c, k, obj, goal)
	if last != nil {
		obj = last
	}
	if err != nil {
		return err
	}
	if goal == wait.Gone && w.Wait {
		return nil
	}
	return k.Print(f, []api.Object{obj}, true)
}

// NewList builds the kind's list verb: the objects of the namespace, or
// of every namespace with -A.
func (k Kind) NewList(f *Factory, short string, aliases ...string) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use: k.Plural, Aliases: aliases, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.Check(f.Output); err != nil {
				return Usagef("%w", err)
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			q := f.NSQuery()
			if all {
				q = nil
			}
			if k.Rows != nil && output.IsTable(f.Output) {
				rows, err := k.Rows(cmd.Context(), c, "/"+k.Plural, q)
				if err != nil {
					return err
				}
				return output.Table(f.IO.Out, f.IO.OutTerm, k.Header, rows)
			}
			items, err := c.List(cmd.Context(), "/"+k.Plural, q)
			if err != nil {
				return err
			}
			return k.Print(f, items, false)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list the "+k.Plural+" of every namespace")
	return cmd
}

// NewDelete builds the kind's delete verb (unbind, deprovision): it
// deletes the object named, saying it is being done (doing: "unbound"),
// and with --wait waits until it is gone. With --abandon it abandons the
// object instead (POST .../abandon): removed at once without asking its
// broker, also while a deletion is stuck; left says what stays behind.
func (k Kind) NewDelete(f *Factory, use, short, doing, left string) *cobra.Command {
	var w WaitFlags
	var abandon bool
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		ValidArgsFunction: First(Completer(f, "/"+k.Plural, true, nil)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client()
			if err != nil {
				return err
			}
			method, path := http.MethodDelete, api.Path(k.Plural, args[0])
			if abandon {
				method, path, doing = http.MethodPost, path+"/abandon", "abandoned: "+left
			}
			var obj api.Object
			if err := c.Do(cmd.Context(), method, path, f.NSQuery(), nil, &obj); err != nil {
				return api.HintNotFound(err, ByName(k.Plural))
			}
			if !w.Wait {
				fmt.Fprintf(f.IO.ErrOut, "%s %s/%s is being %s\n", k.Singular, f.NS(), args[0], doing)
			}
			return k.Finish(cmd.Context(), f, c, obj, w, wait.Gone)
		},
	}
	w.Add(cmd)
	cmd.Flags().BoolVar(&abandon, "abandon", false, "remove it without asking its broker, also while its deletion is stuck (for a broker that is gone for good): what the broker made stays there")
	return cmd
}

// WaitFlags are --wait and --timeout, shared by the verbs that change.
type WaitFlags struct {
	Wait    bool
	Timeout time.Duration
}

// Add registers the flags.
func (w *WaitFlags) Add(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&w.Wait, "wait", "w", false, "follow the operation until it is done, fails or is blocked, showing its progress")
	cmd.Flags().DurationVar(&w.Timeout, "timeout", wait.DefaultTimeout, "with --wait, stop waiting after this long (0: no limit); the operation goes on")
}

// Follow waits when asked to: a failed or blocked operation, or the
// timeout, is the error.
func (w WaitFlags) Follow(ctx context.Context, f *Factory, c *api.Client, k Kind, obj api.Object, goal wait.Goal) (api.Object, error) {
	if !w.Wait {
		return nil, nil
	}
	what := fmt.Sprintf("%s %s/%s", k.Singular, obj.Str("namespace"), obj.Str("name"))
	last, err := wait.Follow(ctx, wait.Options{Client: c, Path: api.Path(k.Plural, obj.Str("id")), Query: f.NSQuery(), Goal: goal,
		What: what, Out: f.IO.ErrOut, Terminal: f.IO.IsTerminal, Timeout: w.Timeout})
	var te *wait.TimeoutError
	if errors.As(err, &te) {
		te.Command = fmt.Sprintf("bindery describe %s %s -n %s", k.Singular, obj.Str("name"), obj.Str("namespace"))
	}
	return last, err
}
