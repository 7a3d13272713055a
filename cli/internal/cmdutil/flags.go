package cmdutil

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// enumValue is a flag that takes one of a fixed set of values, checked
// when the command line is parsed (gh's StringEnumFlag): a wrong value is
// a usage error naming the ones allowed before anything runs.
type enumValue struct {
	p       *string
	allowed []string
}

func (e *enumValue) Set(v string) error {
	if !slices.Contains(e.allowed, v) {
		return fmt.Errorf("want one of %s", strings.Join(e.allowed, ", "))
	}
	*e.p = v
	return nil
}

func (e *enumValue) String() string { return *e.p }
func (e *enumValue) Type() string   { return "string" }

// EnumVar defines a flag on fs that takes one of allowed, and offers them
// as its completions on cmd.
func EnumVar(cmd *cobra.Command, fs *pflag.FlagSet, p *string, name, shorthand, def string, allowed []string, usage string) {
	*p = def
	fs.VarP(&enumValue{p: p, allowed: allowed}, name, shorthand, fmt.Sprintf("%s {%s}", usage, strings.Join(allowed, "|")))
	_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
}

// EnumFlag is EnumVar on cmd's own flags, without a shorthand.
func EnumFlag(cmd *cobra.Command, p *string, name, def string, allowed []string, usage string) {
	EnumVar(cmd, cmd.Flags(), p, name, "", def, allowed, usage)
}

// First offers fn's completions for the first positional argument only:
// the verbs that take one name offer nothing after it.
func First(fn cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return fn(cmd, args, toComplete)
	}
}

// Warn shows the warnings the server sent with an object it created or
// changed (a class, plan or instance that does not exist yet).
func Warn(f *Factory, obj api.Object) {
	list, _ := obj.Get("warnings").([]any)
	for _, w := range list {
		if s, ok := w.(string); ok {
			fmt.Fprintf(f.IO.ErrOut, "warning: %s\n", output.Safe(s))
		}
	}
}

// NotFoundError is something the command line names that does not exist,
// found out by the CLI itself (exit code 3, as the server's 404).
type NotFoundError struct{ Msg string }

func (e *NotFoundError) Error() string { return e.Msg }
