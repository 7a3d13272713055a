package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/bindery-dev/bindery/cli"
)

// usagef is a command line that cannot work as given: the CLI exits with
// code 2 for it, as for its own commands, and not 1, which says the
// command ran and failed.
func usagef(format string, a ...any) error {
	return &cli.UsageError{Err: fmt.Errorf(format, a...)}
}

// envName is the environment variable that stands for a flag.
func envName(flagName string) string {
	return "BINDERY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses args, then fills every flag not given on the command
// line from its BINDERY_<FLAG> variable; --database-url also reads
// DATABASE_URL, and --kubeconfig KUBECONFIG. Problems are reported together.
func parseFlags(fs *flag.FlagSet, args []string) error {
	// The flag package prints a parse error and then the whole usage; the
	// error is printed once, by whoever handles it, with a pointer to -h.
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(out, "usage: bindery %s [flags]\n\nflags (each also BINDERY_<FLAG>, dashes as underscores):\n", fs.Name())
		fs.PrintDefaults()
		return err
	}
	if err != nil {
		return &cli.UsageError{Err: fmt.Errorf("%w (`bindery %s -h` lists the flags)", err, fs.Name())}
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		name, v, ok := lookupEnv(f.Name)
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	})
	if fs.NArg() > 0 {
		errs = append(errs, &cli.UsageError{Err: fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))})
	}
	if f := fs.Lookup("kubeconfig"); f != nil && strings.ContainsRune(f.Value.String(), os.PathListSeparator) {
		// KUBECONFIG may list several files for kubectl to merge; the
		// servers read exactly one cluster's.
		errs = append(errs, fmt.Errorf("--kubeconfig (or KUBECONFIG) %q: name one file", f.Value.String()))
	}
	return errors.Join(errs...)
}

// lookupEnv finds the variable that sets a flag: BINDERY_<FLAG>, else the
// standard one other tools use.
func lookupEnv(flagName string) (name, value string, ok bool) {
	name = envName(flagName)
	value, ok = os.LookupEnv(name)
	if std, has := standardEnv[flagName]; !ok && has {
		name = std
		value, ok = os.LookupEnv(name)
	}
	return name, value, ok
}

// flagSource says where a parsed flag's value came from: the command line
// (--NAME), a variable (its name), or nowhere ("").
func flagSource(fs *flag.FlagSet, flagName string) string {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == flagName })
	if given {
		return "--" + flagName
	}
	if name, _, ok := lookupEnv(flagName); ok {
		return name
	}
	return ""
}

// standardEnv are the variables other tools use for the same settings.
var standardEnv = map[string]string{"database-url": "DATABASE_URL", "kubeconfig": "KUBECONFIG"}

// newFlagSet returns a flag set that prints its usage to stderr and reports
// errors instead of exiting.
func newFlagSet(e env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if e.flagSets != nil {
		*e.flagSets = append(*e.flagSets, fs)
	}
	return fs
}
