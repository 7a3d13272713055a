package quota

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
)

// scripted is a REST API that answers each "METHOD /path?query" (under
// /api/v1) as scripted, and records the requests with their bodies.
type scripted struct {
	mu       sync.Mutex
	answers  map[string][2]string // status, body
	requests []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Method + " " + strings.TrimPrefix(r.URL.Path, "/api/v1")
	if r.URL.RawQuery != "" {
		key += "?" + r.URL.RawQuery
	}
	s.mu.Lock()
	s.requests = append(s.requests, strings.TrimSpace(key+" "+string(body)))
	a, ok := s.answers[key]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":"not_found","message":"not scripted: `+key+`"}`)
		return
	}
	status := http.StatusOK
	if a[0] != "" {
		status = map[string]int{"403": 403, "404": 404, "204": 204}[a[0]]
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, a[1])
}

// run runs a quota command line against srv, the root's -n and -o
// included, and returns what it printed.
func run(t *testing.T, srv *httptest.Server, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := cmdutil.NewFactory(cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	env := map[string]string{"BINDERY_URL": srv.URL, "BINDERY_TOKEN": "t", "HOME": t.TempDir(), "XDG_CONFIG_HOME": t.TempDir()}
	f.Getenv = func(k string) string { return env[k] }
	root := &cobra.Command{Use: "bindery", SilenceErrors: true, SilenceUsage: true}
	root.PersistentFlags().StringVarP(&f.Namespace, "namespace", "n", "", "")
	root.PersistentFlags().StringVarP(&f.Output, "output", "o", "", "")
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.AddCommand(NewCmd(f))
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

const usage = `{"namespace":"team-a","quota":{"namespace":"team-a","instances":10,"paidPlans":false,"plans":[{"planID":"p1","plan":"large","class":"postgresql","planName":"p1","instances":2}],"updatedAt":"2026-01-01T00:00:00Z"},
	"resourceQuotas":[{"namespace":"team-a","name":"objects","instances":5}],
	"instances":{"used":5,"limit":5,"source":"ResourceQuota/objects"},"bindings":{"used":3},
	"plans":[{"planID":"p1","plan":"large","class":"postgresql","planName":"p1","instances":2,"used":1}]}`

// TestQuotaVerbs runs get, set, delete and visibility against a scripted
// API and compares what they print and send exactly.
func TestQuotaVerbs(t *testing.T) {
	t.Parallel()
	api := &scripted{answers: map[string][2]string{
		"GET /quotas/team-a/usage": {"", usage},
		"GET /quotas/team-a":       {"", `{"namespace":"team-a","instances":10,"paidPlans":false,"plans":[{"planID":"p1","plan":"large","class":"postgresql","instances":2}],"updatedAt":"2026-01-01T00:00:00Z"}`},
		"PUT /quotas/team-a":       {"", `{"namespace":"team-a","paidPlans":true,"updatedAt":"2026-01-01T00:00:00Z"}`},
		"GET /quotas/_default":     {"404", `{"error":"not_found","message":"no quota"}`},
		"PUT /quotas/_default":     {"", `{"namespace":"","bindings":4,"paidPlans":true,"updatedAt":"2026-01-01T00:00:00Z"}`},
		"DELETE /quotas/team-b":    {"204", ``},
		"GET /serviceplans?class=postgresql&limit=1000&name=large": {"", `{"items":[{"id":"p1","name":"p1"}]}`},
		"GET /serviceplans?class=postgresql&limit=1000&name=nope":  {"", `{"items":[]}`},
		"PUT /serviceplans/p1/visibility":                          {"", `{"restricted":true,"namespaces":["team-a","team-b"]}`},
		"GET /serviceplans/p1/visibility":                          {"", `{"restricted":false,"namespaces":[]}`},
		"DELETE /serviceplans/p1/visibility":                       {"", `{"restricted":false,"namespaces":[]}`},
		"GET /quotas/default/usage":                                {"403", `{"error":"forbidden","message":"This token is limited to namespace(s) team-a, not \"default\"."}`},
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	getOut := "NAMESPACE team-a\tUSED\tLIMIT\tSET BY\ninstances\t5\t5\tResourceQuota objects\nbindings\t3\tnone\t-\n" +
		"paid plans\t-\tnot allowed\tquota of team-a\ninstances of postgresql/large\t1\t2\tquota of team-a\n"
	for _, tc := range []struct {
		args           []string
		stdout, stderr string
		request        string
		wantErr        string
	}{
		{args: []string{"quota", "get", "-n", "team-a"}, stdout: tabbed(getOut)},
		{args: []string{"quota", "get", "-n", "team-a", "-o", "json"}, stdout: ""},
		{args: []string{"quota", "get"}, wantErr: `This token is limited to namespace(s) team-a, not "default". (ask an admin for a token with that role or namespace: ` + "`bindery token create`)"},
		{args: []string{"quota", "get", "--default"}, wantErr: "there is no default quota: namespaces without their own are not limited (set one with `bindery quota set --default`)"},
		{args: []string{"quota", "set", "-n", "team-a"}, wantErr: "nothing to change: give --instances, --bindings, --paid or --plan"},
		{args: []string{"quota", "set", "-n", "team-a", "--instances", "lots"}, wantErr: `invalid argument "lots" for "--instances" flag: want a count from 0 to 2147483647, or "none"`},
		{args: []string{"quota", "set", "-n", "team-a", "--plan", "large=2"}, wantErr: `invalid argument "large=2" for "--plan" flag: want CLASS/PLAN=N or CLASS/PLAN=none, the external names of a cluster class and plan`},
		{args: []string{"quota", "set", "-n", "team-a", "--instances", "none", "--paid=true", "--plan", "postgresql/large=none", "--plan", "postgresql/small=3"},
			stdout: tabbed(getOut), stderr: "the quota of namespace team-a is set\n",
			request: `PUT /quotas/team-a {"paidPlans":true,"plans":[{"class":"postgresql","plan":"small","instances":3}]}`},
		{args: []string{"quota", "set", "--default", "--bindings", "4"}, stderr: "the default quota is set\n",
			stdout:  tabbed("DEFAULT QUOTA\tLIMIT\ninstances\tnone\nbindings\t4\npaid plans\tallowed\n"),
			request: `PUT /quotas/_default {"bindings":4,"paidPlans":true,"plans":[]}`},
		{args: []string{"quota", "delete", "-n", "team-b"}, stderr: "the quota of namespace team-b removed\n", request: "DELETE /quotas/team-b"},
		{args: []string{"quota", "visibility", "postgresql/large", "--namespaces", "team-b,team-a"},
			stdout:  tabbed("PLAN\tVISIBLE TO\npostgresql/large\tteam-a, team-b\n"),
			request: `PUT /serviceplans/p1/visibility {"namespaces":["team-b","team-a"]}`},
		{args: []string{"quota", "visibility", "postgresql/large"}, stdout: tabbed("PLAN\tVISIBLE TO\npostgresql/large\tevery namespace\n")},
		{args: []string{"quota", "visibility", "postgresql/large", "--all"}, stdout: tabbed("PLAN\tVISIBLE TO\npostgresql/large\tevery namespace\n"),
			request: "DELETE /serviceplans/p1/visibility"},
		{args: []string{"quota", "visibility", "postgresql/large", "--none"}, stdout: tabbed("PLAN\tVISIBLE TO\npostgresql/large\tteam-a, team-b\n"),
			request: `PUT /serviceplans/p1/visibility {"namespaces":[]}`},
		{args: []string{"quota", "visibility", "large"}, wantErr: `"large": name the plan as CLASS/PLAN, the external names of a cluster class and plan`},
		{args: []string{"quota", "visibility", "postgresql/nope"}, wantErr: `the cluster's service class "postgresql" offers no plan "nope"`},
		{args: []string{"quota", "visibility", "postgresql/large", "--all", "--none"}, wantErr: "if any flags in the group [namespaces none all] are set none of the others can be; [all none] were all set"},
	} {
		stdout, stderr, err := run(t, srv, tc.args...)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if tc.args[len(tc.args)-1] == "json" {
			if !strings.Contains(stdout, `"source": "ResourceQuota/objects"`) {
				t.Errorf("%q: %s", tc.args, stdout)
			}
			continue
		}
		if stdout != tc.stdout || stderr != tc.stderr {
			t.Errorf("%q:\nstdout %q\n  want %q\nstderr %q\n  want %q", tc.args, stdout, tc.stdout, stderr, tc.stderr)
		}
		if tc.request != "" && !contains(api.requests, tc.request) {
			t.Errorf("%q: no request %s among %q", tc.args, tc.request, api.requests)
		}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// tabbed aligns tab-separated lines as output.Table does.
func tabbed(s string) string {
	var b bytes.Buffer
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	width := map[int]int{}
	for _, l := range lines {
		for i, c := range strings.Split(l, "\t") {
			width[i] = max(width[i], len(c))
		}
	}
	for _, l := range lines {
		cells := strings.Split(l, "\t")
		for i, c := range cells {
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", width[i]-len(c)+3))
		}
		b.WriteString("\n")
	}
	return b.String()
}
