// Package cmdutil is what every verb of the CLI shares: the streams it
// writes to, the client it reaches the server with, and the usage error
// main turns into exit code 2; flags checked as they are parsed (enums,
// --param), completion from the server, and Kind, which lists, prints,
// deletes and waits for instances and bindings alike.
package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/config"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// IOStreams are the streams a verb reads and writes; tests pass buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// IsTerminal tells whether ErrOut is a terminal (a spinner then).
	IsTerminal bool
	// OutTerm tells whether Out is a terminal, and its width: tables are
	// aligned and cut to it there, tab-separated elsewhere.
	OutTerm output.Term
}

// Factory gives a verb its streams and, lazily, its client.
type Factory struct {
	IO     IOStreams
	Getenv func(string) string
	// Namespace is the value of the persistent -n flag.
	Namespace string
	// Output is the value of the persistent -o flag.
	Output string
	// client, when set, replaces the one the configuration describes.
	client *api.Client
}

// NewFactory returns a factory reading the process environment.
func NewFactory(io IOStreams) *Factory {
	return &Factory{IO: io, Getenv: os.Getenv}
}

// Client returns the client the configuration and BINDERY_URL and
// BINDERY_TOKEN describe.
func (f *Factory) Client() (*api.Client, error) {
	if f.client != nil {
		return f.client, nil
	}
	c, err := config.Load(f.Getenv)
	if err != nil {
		return nil, err
	}
	if c.URL == "" {
		return nil, &UsageError{Err: errors.New("no server: run `bindery login URL`, or set BINDERY_URL and BINDERY_TOKEN")}
	}
	f.client = api.New(c.URL, c.Token)
	return f.client, nil
}

// NS is the namespace of namespaced verbs: -n, else "default".
func (f *Factory) NS() string {
	if f.Namespace == "" {
		return "default"
	}
	return f.Namespace
}

// CheckNamespace refuses a -n that names no namespace before any request,
// naming the flag: the server would refuse it under the name of whichever
// query parameter carried it (?visibleIn= for the marketplace).
func (f *Factory) CheckNamespace() error {
	if f.Namespace != "" && len(validation.IsDNS1123Label(f.Namespace)) > 0 {
		return Usagef("--namespace %q: must be a DNS label: lower case letters, digits and '-', at most 63 characters", f.Namespace)
	}
	return nil
}

// NSQuery is ?namespace=NS, for looking an object up by name.
func (f *Factory) NSQuery() url.Values { return url.Values{"namespace": {f.NS()}} }

// ScopeQuery is the scope of brokers, classes and plans: ?namespace= when
// -n was given (that namespace's own), else nothing (the cluster's).
func (f *Factory) ScopeQuery() url.Values {
	if f.Namespace == "" {
		return nil
	}
	return url.Values{"namespace": {f.Namespace}}
}

// ScopeCompletion is the query of a completion of brokers, classes or
// plans: ScopeQuery, for Completer's extra.
func (f *Factory) ScopeCompletion(*cobra.Command) url.Values {
	q := f.ScopeQuery()
	if q == nil {
		q = url.Values{}
	}
	return q
}

// VisibleIn adds to q (a new query when nil), when -n names a namespace,
// ?visibleIn= of it: the cluster's plans that namespace sees (plan
// visibility). Without -n the server leaves out what the token's
// namespaces do not see.
func (f *Factory) VisibleIn(q url.Values) url.Values {
	if q == nil {
		q = url.Values{}
	}
	if f.Namespace != "" {
		q.Set("visibleIn", f.Namespace)
	}
	return q
}

// UsageError is a command line that cannot work as given: exit code 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef makes a UsageError.
func Usagef(format string, a ...any) error {
	return &UsageError{Err: fmt.Errorf(format, a...)}
}

// Completer returns a completion function listing names from path (a
// namespaced list when namespaced); it fails quietly, as a shell expects.
func Completer(f *Factory, path string, namespaced bool, extra func(*cobra.Command) url.Values) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := f.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		q := url.Values{}
		if extra != nil {
			q = extra(cmd)
		}
		if namespaced {
			q.Set("namespace", f.NS())
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), defaultCompletionTimeout)
		defer cancel()
		items, err := c.List(ctx, path, q)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		seen := map[string]bool{}
		for _, it := range items {
			name := it.Str("spec", "externalName")
			if name == "" {
				name = it.Str("name")
			}
			if strings.HasPrefix(name, toComplete) && !seen[name] {
				seen[name] = true
				out = append(out, cobra.CompletionWithDesc(name, it.Str("spec", "description")))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// defaultCompletionTimeout bounds a completion: a shell waits for it.
const defaultCompletionTimeout = 5 * time.Second

// Completers offers what each of fns offers, each name once: the cluster's
// classes and a namespace's, say. One that fails adds nothing.
func Completers(fns ...cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		seen := map[string]bool{}
		for _, fn := range fns {
			got, _ := fn(cmd, args, toComplete)
			for _, c := range got {
				name, _, _ := strings.Cut(c, "\t")
				if !seen[name] {
					seen[name] = true
					out = append(out, c)
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// Namespaces completes -n with the namespaces the server knows in use.
func Namespaces(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := f.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), defaultCompletionTimeout)
		defer cancel()
		var list struct {
			Items []string `json:"items"`
		}
		if err := c.Do(ctx, "GET", "/namespaces", nil, nil, &list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range list.Items {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// SetClient makes the factory hand out c instead of the client the
// configuration describes: for tests against a scripted server.
func (f *Factory) SetClient(c *api.Client) { f.client = c }

// ByName is the hint added to a name not found among a namespace's
// objects of a kind (its plural, as the list verb is called).
func ByName(plural string) string {
	return fmt.Sprintf("(-n chooses the namespace; `bindery %s -A` lists every namespace's.)", plural)
}
