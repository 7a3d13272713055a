package main

import (
	"errors"
	"flag"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/keyring"
)

// zeroMeaning finds, in a flag's help, what 0 means ("0: never", "0 for
// no bound").
var zeroMeaning = regexp.MustCompile(`\b0(:| for )`)

// TestNumericFlagsChecked: every duration and integer flag of every
// command refuses a negative value, and 0 too unless its help says what 0
// means, before the command does anything, with an error naming the flag.
// A flag that took 0 or -1 for its default, or for no bound, would say one
// thing and do another.
func TestNumericFlagsChecked(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=postgres://x@127.0.0.1:1/x", "BINDERY_ENCRYPTION_KEY=" + keyring.Generate(),
		"BINDERY_BROKER_USERNAME=osb-user", "BINDERY_BROKER_PASSWORD=osb-password-1234"}
	// Every listener on a free port, should a command start after all.
	const free = "127.0.0.1:0"
	base := map[string][]string{
		"up":              {"--data-dir", t.TempDir(), "--catalog-listen", free, "--controller-listen", free, "--broker-listen", free, "--apiserver-listen", free},
		"down":            {"--kubeconfig", "/nonexistent"},
		"serve nodeagent": {"--csi", "--listen", free, "--csi-kubelet-dir", t.TempDir()},
		"migrate":         {},
		"keys reseal":     {},
	}
	checked := 0
	for _, c := range configCommands {
		fs, err := commandFlags(t.Context(), c.args)
		if err != nil {
			t.Fatal(err)
		}
		fs.VisitAll(func(f *flag.Flag) {
			var neg, zero string
			switch f.Value.(flag.Getter).Get().(type) {
			case time.Duration:
				neg, zero = "-1s", "0s"
			case int, int64:
				neg, zero = "-1", "0"
			default:
				return
			}
			extra, ok := base[c.name]
			if !ok {
				extra = []string{"--listen", free}
			}
			_, usage := flag.UnquoteUsage(f)
			values := []string{neg}
			if !zeroMeaning.MatchString(usage) {
				values = append(values, zero)
			}
			for _, v := range values {
				checked++
				args := slices.Concat(c.args, extra, []string{"--" + f.Name, v})
				t.Run(strings.Join(args[:len(c.args)], "-")+"/"+f.Name+"="+v, func(t *testing.T) {
					t.Parallel()
					p := start(t, env, args...)
					if err := p.wait(t); err == nil || !strings.Contains(p.stderr.String(), "--"+f.Name) {
						t.Errorf("bindery %s: %v; want it refused, naming --%s:\n%s", strings.Join(args, " "), err, f.Name, p.stderr.String())
					}
				})
			}
		})
	}
	if checked < 80 {
		t.Errorf("%d values of numeric flags checked; the commands have more", checked)
	}
}

// TestServerUsageErrorsExit2: a server command line that names no
// subcommand, an unknown one, or lacks a required flag is a usage error,
// exit code 2 as for the client commands (DESIGN.md), with the reason on
// stderr. They exited 1, as if the command had run and failed.
func TestServerUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=postgres://x@127.0.0.1:1/x"}
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"migrate"}, "want up, down or version"},
		{[]string{"migrate", "foo"}, "want up, down or version"},
		{[]string{"migrate", "down"}, "--schema is required"},
		{[]string{"migrate", "up", "--schema", "nope"}, `unknown schema "nope"`},
		{[]string{"serve"}, "name a component"},
		{[]string{"serve", "nothing"}, `unknown component "nothing"`},
		{[]string{"keys", "foo"}, "want `keys reseal`"},
		{[]string{"docs", "foo"}, "want `docs config`"},
		{[]string{"version", "foo"}, "takes no arguments"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, "_"), func(t *testing.T) {
			t.Parallel()
			p := start(t, env, c.args...)
			err := p.wait(t)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(p.stderr.String(), c.says) {
				t.Errorf("bindery %s: %v, want exit status 2 saying %q:\n%s", strings.Join(c.args, " "), err, c.says, p.stderr.String())
			}
		})
	}
}
