package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/internal/osbtest"
)

// ansi matches the escape sequences the CLI itself writes to a terminal
// (the spinner's line clearing), to read what the terminal shows.
var ansi = regexp.MustCompile("\r|\x1b\\[K")

// TestWaitOutcomes: --wait ends on every outcome the server knows, each
// with its exit code and its reason in words, on a terminal (a pty) and
// not: success, a class or plan no broker offers (refused with the
// nearest name, or recorded and blocked with --allow-missing), a
// deprovision blocked by a binding, a binding of a missing instance, a
// broker that fails the provision for good, and the timeout.
func TestWaitOutcomes(t *testing.T) {
	w := setup(t, true)
	w.login(w.admin)
	w.must(0, "brokers", "register", "builtin", w.brokerURL, "-u", brokerUser, "-p", brokerPass)
	failing := osbtest.New(t, osbtest.WithCatalog([]osbtest.Service{{ID: "flaky-id", Name: "flaky", Description: "Fails.", Bindable: true,
		Plans: []osbtest.Plan{{ID: "doomed-id", Name: "doomed", Description: "Always refused."}}}}))
	failing.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 400, Code: "QuotaExceeded", Description: "quota exceeded for this team"})
	w.must(0, "brokers", "register", "failing", failing.URL())

	for _, pty := range []bool{false, true} {
		ns := "plain"
		if pty {
			ns = "tty"
		}
		run := func(want int, says []string, args ...string) {
			t.Helper()
			args = append([]string{"-n", ns}, args...)
			var shown string
			var code int
			if pty {
				r := w.runPTY(args...)
				code, shown = r.code, ansi.ReplaceAllString(r.out, "")
				if args[2] == "provision" && want == ExitOK && !strings.Contains(r.out, "\x1b[K") {
					t.Errorf("no spinner on the terminal: %q", r.out)
				}
			} else {
				r := w.run(args...)
				code, shown = r.code, r.out+r.errOut
			}
			if code != want {
				t.Fatalf("pty=%v bindery %s: exit %d, want %d\n%s", pty, strings.Join(args, " "), code, want, shown)
			}
			contains(t, "bindery "+strings.Join(args, " "), shown, says...)
		}
		run(ExitOK, []string{"done in", "It is provisioned and ready."}, "provision", "db", "-c", "postgresql", "-p", "small", "--wait")
		run(ExitNotFound, []string{`Service class "postgresql" has no plan named "smal".`, `Did you mean "small"?`, "--allow-missing"},
			"provision", "typo", "-c", "postgresql", "-p", "smal", "--wait")
		run(ExitNotFound, []string{`No broker offers a service class named "postgres".`, `Did you mean "postgresql"?`},
			"provision", "typo", "-c", "postgres", "-p", "small", "--wait")
		run(ExitBlocked, []string{"warning: " + `Service class "postgresql" has no plan named "tiny"`, "is blocked after",
			`Service class "postgresql" has no plan named "tiny"`}, "provision", "later", "-c", "postgresql", "-p", "tiny", "--allow-missing", "--wait")
		run(ExitOK, []string{"Its credentials are ready."}, "bind", "app", "--instance", "db", "--wait")
		run(ExitBlocked, []string{"instance " + ns + "/db is blocked after", `It still has binding "app": delete it first (unbind)`},
			"deprovision", "db", "--wait")
		run(ExitBlocked, []string{`No instance named "nope" exists in namespace "` + ns + `"`, "binding " + ns + "/orphan is blocked"},
			"bind", "orphan", "--instance", "nope", "--wait")
		run(ExitOperationFailed, []string{"instance " + ns + "/broke failed after", "The broker failed the provision", "quota exceeded for this team"},
			"provision", "broke", "-c", "flaky", "-p", "doomed", "--wait")
		run(ExitTimeout, []string{"stopped waiting for instance " + ns + "/slow after", "(--timeout)", "bindery describe instance slow -n " + ns},
			"provision", "slow", "-c", "nosuchclass", "-p", "x", "--allow-missing", "--wait", "--timeout", "300ms")
		if pty {
			r := w.runPTY("-n", ns, "instances")
			if !strings.Contains(r.out, "NAMESPACE   NAME") {
				t.Errorf("a table on a terminal is not aligned:\n%q", r.out)
			}
		}
	}
}
