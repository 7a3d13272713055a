package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestQuotaCLI: an admin sets a namespace's quota with `bindery quota
// set`; its developer provisions and binds up to the limits and is
// refused the next with the server's sentence (exit 4); `bindery quota
// get` shows the usage; 20 provisions at once for 5 places make 5; a plan
// made visible to another namespace is not in this namespace's
// marketplace nor its completion, provisioning it is refused as for a
// plan no broker offers, and --allow-missing leaves an instance that waits
// for it.
func TestQuotaCLI(t *testing.T) {
	w := setup(t, false)
	w.login(w.admin)
	w.must(0, "brokers", "register", "builtin", w.brokerURL, "-u", brokerUser, "-p", brokerPass)
	r := w.must(0, "quota", "set", "-n", "team", "--instances", "2", "--bindings", "1", "--paid=false", "--plan", "postgresql/standard=1")
	contains(t, "quota set", r.errOut, "the quota of namespace team is set")
	contains(t, "quota set", r.out, "instances of postgresql/standard")

	dev, _, err := w.store.IssueToken(context.Background(), catalog.TokenRequest{Role: catalog.RoleDeveloper, Namespaces: []string{"team"}})
	if err != nil {
		t.Fatal(err)
	}
	w.env["BINDERY_TOKEN"] = dev
	refused := func(sentence string, args ...string) {
		t.Helper()
		r := w.must(ExitForbidden, append([]string{"-n", "team"}, args...)...)
		if r.errOut != "bindery: "+sentence+"\n" {
			t.Errorf("bindery %s: stderr %q, want the sentence %q", strings.Join(args, " "), r.errOut, sentence)
		}
	}
	refused("namespace team may not use paid plans, and plan large-async is not free", "provision", "rich", "-c", "postgresql", "-p", "large-async")
	w.must(0, "-n", "team", "provision", "db", "-c", "postgresql", "-p", "standard")
	refused("namespace team may have 1 instance of plan standard and has 1", "provision", "db2", "-c", "postgresql", "-p", "standard")
	w.must(0, "-n", "team", "provision", "db2", "-c", "postgresql", "-p", "small")
	refused("namespace team may have 2 instances and has 2", "provision", "db3", "-c", "postgresql", "-p", "small")
	w.must(0, "-n", "team", "bind", "app", "--instance", "db")
	refused("namespace team may have 1 binding and has 1", "bind", "app2", "--instance", "db")
	r = w.must(0, "quota", "get", "-n", "team")
	if want := "NAMESPACE team\tUSED\tLIMIT\tSET BY\n" +
		"instances\t2\t2\tquota of team\n" +
		"bindings\t1\t1\tquota of team\n" +
		"brokers\t0\t16\t--max-brokers-per-namespace\n" +
		"paid plans\t-\tnot allowed\tquota of team\n" +
		"instances of postgresql/standard\t1\t1\tquota of team\n"; r.out != want {
		t.Errorf("quota get:\n%s\nwant\n%s", r.out, want)
	}
	// A developer does not change quotas.
	w.must(ExitForbidden, "quota", "set", "-n", "team", "--instances", "20")
	delete(w.env, "BINDERY_TOKEN")

	// 20 at once for the last 5 places.
	w.must(0, "quota", "set", "-n", "race", "--instances", "5")
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Go(func() {
			codes[i] = w.run("-n", "race", "provision", fmt.Sprintf("db-%d", i), "-c", "postgresql", "-p", "small").code
		})
	}
	wg.Wait()
	made := 0
	for _, c := range codes {
		if c == 0 {
			made++
		} else if c != ExitForbidden {
			t.Errorf("a racer exited %d", c)
		}
	}
	if made != 5 {
		t.Errorf("%d of 20 racers provisioned, want 5", made)
	}

	// Plan visibility.
	r = w.must(0, "quota", "visibility", "postgresql/standard", "--namespaces", "other")
	contains(t, "visibility", r.out, "postgresql/standard\tother")
	r = w.must(0, "-n", "team", "marketplace", "-c", "postgresql")
	if strings.Contains(r.out, "standard") || !strings.Contains(r.out, "small") {
		t.Errorf("team's marketplace shows a plan visible to other only, or not its own:\n%s", r.out)
	}
	contains(t, "other's marketplace", w.must(0, "-n", "other", "marketplace").out, "small, standard, large-async")
	r = w.must(0, "__complete", "-n", "team", "provision", "db4", "-c", "postgresql", "-p", "")
	if strings.Contains(r.out, "standard") || !strings.Contains(r.out, "small") {
		t.Errorf("team's plan completion:\n%s", r.out)
	}
	w.must(0, "quota", "delete", "-n", "team")
	// Even for an admin, a plan hidden from the namespace is, there, a
	// plan no broker offers: refused, or recorded to wait for it.
	r = w.must(ExitNotFound, "-n", "team", "provision", "hidden", "-c", "postgresql", "-p", "standard")
	contains(t, "a hidden plan", r.errOut, `Service class "postgresql" has no plan named "standard".`)
	r = w.must(0, "-n", "team", "provision", "hidden", "-c", "postgresql", "-p", "standard", "--allow-missing", "-o", "json")
	if strings.Contains(r.out, "clusterServicePlanRef") {
		t.Errorf("an instance of a plan hidden from its namespace resolved:\n%s", r.out)
	}
	w.must(0, "quota", "visibility", "postgresql/standard", "--all")
}
