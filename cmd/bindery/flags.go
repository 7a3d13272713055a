package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// envName is the environment variable that stands for a flag.
func envName(flagName string) string {
	return "BINDERY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses args, then fills every flag not given on the command
// line from its BINDERY_<FLAG> variable; --database-url also reads
// DATABASE_URL, and --kubeconfig KUBECONFIG. Problems are reported together.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		name := envName(f.Name)
		v, ok := os.LookupEnv(name)
		if std, has := standardEnv[f.Name]; !ok && has {
			name = std
			v, ok = os.LookupEnv(name)
		}
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	})
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	if f := fs.Lookup("kubeconfig"); f != nil && strings.ContainsRune(f.Value.String(), os.PathListSeparator) {
		// KUBECONFIG may list several files for kubectl to merge; the
		// servers read exactly one cluster's.
		errs = append(errs, fmt.Errorf("--kubeconfig (or KUBECONFIG) %q: name one file", f.Value.String()))
	}
	return errors.Join(errs...)
}

// standardEnv are the variables other tools use for the same settings.
var standardEnv = map[string]string{"database-url": "DATABASE_URL", "kubeconfig": "KUBECONFIG"}

// newFlagSet returns a flag set that prints its usage to stderr and reports
// errors instead of exiting.
func newFlagSet(e env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}
