package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/bindery-dev/bindery/catalog"
)

func contains(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, s)
		}
	}
}

// TestLifecycle walks the tour of the README against a real catalog, broker
// and engine: login, register a broker, browse, provision, bind, read the
// credentials, describe, unbind and deprovision, each waiting for the
// engine.
func TestLifecycle(t *testing.T) {
	w := setup(t, true)

	// Not logged in: a usage error that names the fix.
	r := w.must(ExitUsage, "instances")
	contains(t, "stderr", r.errOut, "bindery login URL", "BINDERY_URL")

	w.login(w.admin)
	if m := fileMode(t, configFile(w)); m != 0o600 {
		t.Errorf("config mode %o, want 600", m)
	}
	raw, _ := os.ReadFile(configFile(w))
	contains(t, "config", string(raw), w.url, w.admin)

	r = w.must(0, "brokers", "register", "builtin", w.brokerURL, "-u", brokerUser, "-p", brokerPass)
	contains(t, "register", r.out, "builtin", "Ready")
	r = w.must(0, "brokers", "list")
	contains(t, "brokers list", r.out, "NAME", "builtin", w.brokerURL)
	r = w.must(0, "brokers", "relist", "builtin")
	contains(t, "relist", r.out, "builtin")

	r = w.must(0, "marketplace")
	contains(t, "marketplace", r.out, "CLASS", "postgresql", "small, standard, large-async", "builtin")
	r = w.must(0, "marketplace", "-c", "postgresql")
	contains(t, "marketplace -c", r.out, "PLAN", "small", "large-async", "false")
	w.must(ExitNotFound, "marketplace", "-c", "nosuchclass")
	r = w.must(ExitNotFound, "marketplace", "-c", "postgres")
	contains(t, "marketplace -c typo", r.errOut, `No broker offers a service class named "postgres". Did you mean "postgresql"?`)

	// Bad parameters are the server's 400, naming the field: exit 2.
	r = w.must(ExitUsage, "provision", "db", "-c", "postgresql", "-p", "small", "--param", "statement_timeout_ms=0")
	contains(t, "bad parameter", r.errOut, "statement_timeout_ms")
	r = w.must(ExitUsage, "provision", "db", "-c", "postgresql")
	contains(t, "no plan", r.errOut, "-p PLAN", "bindery marketplace")
	r = w.must(ExitUsage, "provision", "db", "-c", "postgresql", "-p", "small", "--params-json", "[1]")
	contains(t, "params-json", r.errOut, "--params-json")

	r = w.must(0, "-n", "team", "provision", "db", "-c", "postgresql", "-p", "small", "--param", "statement_timeout_ms=5000", "--wait")
	contains(t, "provision stderr", r.errOut, "done in")
	contains(t, "provision", r.out, "team", "db", "postgresql", "small")

	r = w.must(0, "instances", "-n", "team")
	contains(t, "instances", r.out, "NAMESPACE\tNAME\tCLASS\tPLAN\tSTATUS\n", "team\tdb\tpostgresql\tsmall\tReady\n")
	r = w.must(0, "instances")
	if strings.Contains(r.out, "db") {
		t.Errorf("the default namespace lists team's instance:\n%s", r.out)
	}
	r = w.must(0, "instances", "-A", "-o", "json")
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("instances -o json: %v\n%s", err, r.out)
	}
	r = w.must(0, "instances", "-A", "-o", "yaml")
	if err := yaml.Unmarshal([]byte(r.out), &list); err != nil || len(list.Items) != 1 || list.Items[0]["name"] != "db" {
		t.Fatalf("instances -o yaml: %v\n%s", err, r.out)
	}
	w.must(ExitUsage, "instances", "-o", "xml")

	r = w.must(0, "-n", "team", "update", "db", "--param", "statement_timeout_ms=7000", "--wait")
	contains(t, "update stderr", r.errOut, "done in")

	r = w.must(0, "-n", "team", "bind", "app", "--instance", "db", "--wait")
	contains(t, "bind", r.out, "app", "db", "Ready")
	r = w.must(0, "-n", "team", "bindings")
	contains(t, "bindings", r.out, "NAMESPACE", "team", "app", "db", "Ready")

	// The export against the real server: the list's objects, one a line.
	r = w.must(0, "export", "instances")
	var exported map[string]any
	if err := json.Unmarshal([]byte(r.out), &exported); err != nil || exported["name"] != "db" || strings.Count(r.out, "\n") != 1 {
		t.Fatalf("export instances: %v\n%s", err, r.out)
	}
	contains(t, "export instances stderr", r.errOut, "1 instance exported (revision ")
	r = w.must(0, "-n", "other", "export", "bindings")
	if r.out != "" || !strings.HasPrefix(r.errOut, "0 bindings exported") {
		t.Errorf("export of another namespace's bindings: %q %q", r.out, r.errOut)
	}
	r = w.must(ExitUsage, "export", "instances", "-l", "a b")
	contains(t, "export with a bad selector", r.errOut, "label selector")

	r = w.must(0, "-n", "team", "credentials", "app", "-o", "json")
	var creds map[string]any
	if err := json.Unmarshal([]byte(r.out), &creds); err != nil || creds["password"] == "" || creds["password"] == nil {
		t.Fatalf("credentials -o json: %v\n%s", err, r.out)
	}
	r = w.must(0, "-n", "team", "credentials", "app", "-o", "dotenv")
	contains(t, "dotenv", r.out, "PASSWORD='", "USERNAME='")
	r = w.must(0, "-n", "team", "credentials", "app", "-o", "env")
	contains(t, "env", r.out, "export PASSWORD='")
	w.must(ExitUsage, "-n", "team", "credentials", "app", "-o", "table") // credentials are no table
	r = w.must(ExitNotFound, "credentials", "app")                       // the default namespace has none
	contains(t, "credentials in another namespace", r.errOut, `No binding is named "app" in namespace "default". (-n chooses the namespace; `+"`bindery bindings -A`"+` lists every namespace's.)`)

	r = w.must(0, "-n", "team", "describe", "instance", "db")
	contains(t, "describe instance", r.out, "Name:", "db", "Class:", "postgresql", "Conditions:", "Ready", "History:", "It is updated and ready.", "statement_timeout_ms", "Bindings:\n  NAME   SECRET   STATUS\n  app ")
	r = w.must(0, "-n", "team", "describe", "binding", "app", "-o", "json")
	var d struct {
		Object map[string]any   `json:"object"`
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.out), &d); err != nil || d.Object["name"] != "app" || len(d.Events) == 0 {
		t.Fatalf("describe binding -o json: %v\n%s", err, r.out)
	}
	r = w.must(0, "describe", "broker", "builtin")
	contains(t, "describe broker", r.out, "URL:", w.brokerURL, "History:")
	w.must(ExitNotFound, "describe", "instance", "nosuch")
	w.must(ExitUsage, "describe", "gadget", "x")

	// The broker has a plan in use: deregistering is refused.
	r = w.must(ExitFailed, "brokers", "deregister", "builtin")
	contains(t, "deregister in use", r.errOut, "instances")

	r = w.must(0, "-n", "team", "unbind", "app", "--wait")
	contains(t, "unbind", r.errOut, "deleted")
	w.must(ExitNotFound, "-n", "team", "describe", "binding", "app")
	r = w.must(0, "-n", "team", "deprovision", "db", "--wait")
	contains(t, "deprovision", r.errOut, "deleted")
	w.must(ExitNotFound, "-n", "team", "deprovision", "db")

	r = w.must(0, "brokers", "deregister", "builtin")
	contains(t, "deregister", r.out, "deregistered")
}

// TestTokensAndRoles: token create, list and revoke over REST; a viewer cannot
// provision (exit 4); a revoked token stops working at once; BINDERY_URL
// and BINDERY_TOKEN override the saved configuration.
func TestTokensAndRoles(t *testing.T) {
	w := setup(t, false)
	ctx := context.Background()
	viewer, _, err := w.store.IssueToken(ctx, catalog.TokenRequest{Role: catalog.RoleViewer, Name: "ci-viewer", Namespaces: []string{"team"}})
	if err != nil {
		t.Fatal(err)
	}
	r := w.runIn("bdy_not-a-token\n", "bindery", "login", w.url)
	if r.code != ExitForbidden {
		t.Errorf("login with a bad token: exit %d, want %d", r.code, ExitForbidden)
	}
	contains(t, "bad token", r.errOut, "did not accept the token")
	w.must(ExitUsage, "login", "localhost:80")
	if r := w.runIn("", "bindery", "login", w.url); r.code != ExitUsage || !strings.Contains(r.errOut, "BINDERY_TOKEN") {
		t.Errorf("login without a token: exit %d, stderr %q; want %d naming BINDERY_TOKEN", r.code, r.errOut, ExitUsage)
	}
	// The REST URL as the banner prints it, and the web UI's, both work;
	// BINDERY_TOKEN is read when set.
	for _, u := range []string{w.url + "/api/v1", w.url + "/api/v1/", w.url + "/"} {
		if r := w.runIn(w.admin+"\n", "bindery", "login", u); r.code != 0 {
			t.Errorf("login %s: exit %d\n%s", u, r.code, r.errOut)
		}
		if raw, _ := os.ReadFile(configFile(w)); !strings.Contains(string(raw), w.url+"\n") {
			t.Errorf("login %s saved:\n%s\nwant the server's base URL %s", u, raw, w.url)
		}
	}
	w.env["BINDERY_TOKEN"] = w.admin
	w.must(0, "login", w.url)
	delete(w.env, "BINDERY_TOKEN")
	w.login(w.admin)

	// Away from a data directory, a logged-in admin creates tokens over
	// the REST API too.
	made := strings.TrimSpace(w.must(0, "token", "create", "--role", "developer", "--name", "rest-made", "-n", "team", "-n", "qa", "--expires-in", "1h").out)
	if !strings.HasPrefix(made, "bdy_") {
		t.Fatalf("token create printed %q", made)
	}
	w.must(ExitUsage, "token", "create", "--role", "root")
	r = w.must(0, "token", "list")
	contains(t, "token list", r.out, "ci-viewer", "viewer", "team", "admin", "*", "rest-made", "qa,team")
	if strings.Contains(r.out, viewer) || strings.Contains(r.out, w.admin) || strings.Contains(r.out, made) {
		t.Error("token list shows a token")
	}
	w.must(0, "token", "revoke", "rest-made")

	w.env["BINDERY_TOKEN"] = viewer
	r = w.must(ExitForbidden, "-n", "team", "provision", "db", "-c", "postgresql", "-p", "small", "--allow-missing")
	contains(t, "viewer provision", r.errOut, "bindery token create")
	w.must(0, "-n", "team", "instances")
	w.must(ExitForbidden, "-n", "other", "instances")
	delete(w.env, "BINDERY_TOKEN")

	w.must(0, "token", "revoke", "ci-viewer")
	w.env["BINDERY_TOKEN"] = viewer
	w.must(ExitForbidden, "-n", "team", "instances")
	delete(w.env, "BINDERY_TOKEN")
	w.must(ExitNotFound, "token", "revoke", "ci-viewer")

	// BINDERY_URL wins over the file.
	w.env["BINDERY_URL"] = "http://127.0.0.1:1"
	r = w.must(ExitFailed, "instances")
	contains(t, "unreachable", r.errOut, "127.0.0.1:1", "BINDERY_URL")
	delete(w.env, "BINDERY_URL")
}

// TestCompletionAndPlugin: completions come from the server; called as
// kubectl-bindery the help says `kubectl bindery`; the completion scripts
// exist for bash, zsh and fish.
func TestCompletionAndPlugin(t *testing.T) {
	w := setup(t, false)
	w.login(w.admin)
	w.must(0, "brokers", "register", "builtin", w.brokerURL, "-u", brokerUser, "-p", brokerPass)

	r := w.must(0, "__complete", "provision", "db", "-c", "")
	contains(t, "class completion", r.out, "postgresql")
	r = w.must(0, "__complete", "provision", "db", "-c", "postgresql", "-p", "sm")
	contains(t, "plan completion", r.out, "small")
	if strings.Contains(r.out, "standard") {
		t.Errorf("plan completion ignores the prefix:\n%s", r.out)
	}
	w.must(0, "-n", "team", "provision", "orders", "-c", "postgresql", "-p", "small")
	r = w.must(0, "__complete", "-n", "team", "deprovision", "")
	contains(t, "instance completion", r.out, "orders")
	r = w.must(0, "__complete", "describe", "")
	contains(t, "describe completion", r.out, "instance", "binding", "broker")
	// Nothing for positional arguments a verb does not take, no files.
	for _, args := range [][]string{{"-n", "team", "deprovision", "orders", ""}, {"instances", ""}, {"provision", ""}, {"describe", "broker", "builtin", ""}} {
		r = w.must(0, append([]string{"__complete"}, args...)...)
		if strings.TrimSpace(r.out) != ":4" {
			t.Errorf("completion of %q offers %q, want nothing and no files", args, r.out)
		}
	}
	r = w.must(0, "__complete", "-n", "")
	contains(t, "namespace completion", r.out, "team\n")
	r = w.must(0, "__complete", "provision", "x", "--scope", "")
	contains(t, "scope completion", r.out, "cluster\n", "namespace\n")
	r = w.must(0, "provision", "-h")
	contains(t, "provision -h", r.out, "-c, --class string", "--scope string", "{cluster|namespace}", "--allow-missing", "--timeout duration")
	r = w.must(0, "__complete", "describe", "broker", "")
	contains(t, "describe broker completion", r.out, "builtin")

	for _, sh := range []string{"bash", "zsh", "fish"} {
		r = w.must(0, "completion", sh)
		contains(t, sh, r.out, "bindery")
	}

	r = w.runAs(filepath.Join("/usr/local/bin", PluginName), "--help")
	if r.code != 0 {
		t.Fatalf("kubectl-bindery --help: exit %d", r.code)
	}
	contains(t, "plugin help", r.out, "kubectl bindery [command]")
	r = w.runAs(PluginName, "marketplace")
	contains(t, "plugin marketplace", r.out, "postgresql")

	w.must(0, "health", w.url)
	w.must(ExitFailed, "health", "http://127.0.0.1:1")

	w.must(ExitUsage, "frobnicate")
	w.must(ExitUsage, "provision")
	w.must(ExitUsage, "instances", "--no-such-flag")
	// A -n that names no namespace, named as the flag whichever query
	// would carry it.
	for _, args := range [][]string{{"marketplace"}, {"provision", "db", "-c", "postgresql", "-p", "small"}, {"instances"}} {
		r := w.must(ExitUsage, append([]string{"-n", "bad ns"}, args...)...)
		contains(t, fmt.Sprint(args, " -n 'bad ns'"), r.errOut, `--namespace "bad ns": must be a DNS label`)
	}
}
