package main

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/keyring"
)

// TestDurationFlagsChecked: every duration flag of every command refuses
// a negative value, and 0 too unless its help says what 0 means ("0:
// never"), before the command does anything, with an error naming the
// flag. A flag that took 0 or -1s for its default, or for no bound, would
// say one thing and do another.
func TestDurationFlagsChecked(t *testing.T) {
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
			if _, ok := f.Value.(flag.Getter).Get().(time.Duration); !ok {
				return
			}
			extra, ok := base[c.name]
			if !ok {
				extra = []string{"--listen", free}
			}
			_, usage := flag.UnquoteUsage(f)
			values := []string{"-1s"}
			if !strings.Contains(usage, "0:") {
				values = append(values, "0s")
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
	if checked < 30 {
		t.Errorf("%d values of duration flags checked; the commands have more", checked)
	}
}
