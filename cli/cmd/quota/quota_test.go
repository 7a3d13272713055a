package quota

import (
	"slices"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/clitest"
)

const usage = `{"namespace":"team-a","quota":{"namespace":"team-a","instances":10,"paidPlans":false,"plans":[{"planID":"p1","plan":"large","class":"postgresql","planName":"p1","instances":2}],"updatedAt":"2026-01-01T00:00:00Z"},
	"resourceQuotas":[{"namespace":"team-a","name":"objects","instances":5}],
	"instances":{"used":5,"limit":5,"source":"ResourceQuota/objects"},"bindings":{"used":3},
	"brokers":{"used":2,"limit":16,"source":"server"},
	"plans":[{"planID":"p1","plan":"large","class":"postgresql","planName":"p1","instances":2,"used":1}]}`

// TestQuotaVerbs runs get, set, delete and visibility against a scripted
// API and compares what they print and send exactly.
func TestQuotaVerbs(t *testing.T) {
	t.Parallel()
	srv := clitest.New(t).
		On("GET", "/quotas/team-a/usage", 200, usage).
		On("GET", "/quotas/team-a", 200, `{"namespace":"team-a","instances":10,"paidPlans":false,"plans":[{"planID":"p1","plan":"large","class":"postgresql","instances":2}],"updatedAt":"2026-01-01T00:00:00Z"}`).
		On("PUT", "/quotas/team-a", 200, `{"namespace":"team-a","paidPlans":true,"updatedAt":"2026-01-01T00:00:00Z"}`).
		On("GET", "/quotas/_default", 404, `{"error":"not_found","message":"no quota"}`).
		On("PUT", "/quotas/_default", 200, `{"namespace":"","bindings":4,"paidPlans":true,"updatedAt":"2026-01-01T00:00:00Z"}`).
		On("DELETE", "/quotas/team-b", 204, ``).
		On("GET", "/serviceplans?class=postgresql&limit=1000&name=large", 200, `{"items":[{"id":"p1","name":"p1"}]}`).
		On("GET", "/serviceplans?class=postgresql&limit=1000&name=nope", 200, `{"items":[]}`).
		On("PUT", "/serviceplans/p1/visibility", 200, `{"restricted":true,"namespaces":["team-a","team-b"]}`).
		On("GET", "/serviceplans/p1/visibility", 200, `{"restricted":false,"namespaces":[]}`).
		On("DELETE", "/serviceplans/p1/visibility", 200, `{"restricted":false,"namespaces":[]}`).
		On("GET", "/quotas/default/usage", 403, `{"error":"forbidden","message":"This token is limited to namespace(s) team-a, not \"default\"."}`)
	getOut := "NAMESPACE team-a\tUSED\tLIMIT\tSET BY\ninstances\t5\t5\tResourceQuota objects\nbindings\t3\tnone\t-\n" +
		"brokers\t2\t16\t--max-brokers-per-namespace\n" +
		"paid plans\t-\tnot allowed\tquota of team-a\ninstances of postgresql/large\t1\t2\tquota of team-a\n"
	for _, tc := range []struct {
		args           []string
		terminal       bool
		stdout, stderr string
		request        string
		wantErr        string
	}{
		{args: []string{"quota", "get", "-n", "team-a"}, stdout: getOut},
		{args: []string{"quota", "get", "-n", "team-a"}, terminal: true, stdout: "NAMESPACE team-a                USED   LIMIT         SET BY\n" +
			"instances                       5      5             ResourceQuota objects\nbindings                        3      none          -\n" +
			"brokers                         2      16            --max-brokers-per-namespace\n" +
			"paid plans                      -      not allowed   quota of team-a\ninstances of postgresql/large   1      2             quota of team-a\n"},
		{args: []string{"quota", "get", "-n", "team-a", "-o", "json"}, stdout: ""},
		{args: []string{"quota", "get"}, wantErr: `This token is limited to namespace(s) team-a, not "default". Ask an admin for a token with that role or namespace (` + "`bindery token create`)."},
		{args: []string{"quota", "get", "--default"}, wantErr: "there is no default quota: namespaces without their own are not limited (set one with `bindery quota set --default`)"},
		{args: []string{"quota", "set", "-n", "team-a"}, wantErr: "nothing to change: give --instances, --bindings, --paid or --plan"},
		{args: []string{"quota", "set", "-n", "team-a", "--instances", "lots"}, wantErr: `invalid argument "lots" for "--instances" flag: want a count from 0 to 2147483647, or "none"`},
		{args: []string{"quota", "set", "-n", "team-a", "--plan", "large=2"}, wantErr: `invalid argument "large=2" for "--plan" flag: want CLASS/PLAN=N or CLASS/PLAN=none, the external names of a cluster class and plan`},
		{args: []string{"quota", "set", "-n", "team-a", "--instances", "none", "--paid=true", "--plan", "postgresql/large=none", "--plan", "postgresql/small=3"},
			stdout: getOut, stderr: "the quota of namespace team-a is set\n",
			request: `PUT /quotas/team-a {"paidPlans":true,"plans":[{"class":"postgresql","plan":"small","instances":3}]}`},
		{args: []string{"quota", "set", "--default", "--bindings", "4"}, stderr: "the default quota is set\n",
			stdout:  "DEFAULT QUOTA\tLIMIT\ninstances\tnone\nbindings\t4\npaid plans\tallowed\n",
			request: `PUT /quotas/_default {"bindings":4,"paidPlans":true,"plans":[]}`},
		{args: []string{"quota", "delete", "-n", "team-b"}, stderr: "the quota of namespace team-b removed\n", request: "DELETE /quotas/team-b"},
		{args: []string{"quota", "visibility", "postgresql/large", "--namespaces", "team-b,team-a"},
			stdout:  "PLAN\tVISIBLE TO\npostgresql/large\tteam-a, team-b\n",
			request: `PUT /serviceplans/p1/visibility {"namespaces":["team-b","team-a"]}`},
		{args: []string{"quota", "visibility", "postgresql/large"}, stdout: "PLAN\tVISIBLE TO\npostgresql/large\tevery namespace\n"},
		{args: []string{"quota", "visibility", "postgresql/large", "--all"}, stdout: "PLAN\tVISIBLE TO\npostgresql/large\tevery namespace\n",
			request: "DELETE /serviceplans/p1/visibility"},
		{args: []string{"quota", "visibility", "postgresql/large", "--none"}, stdout: "PLAN\tVISIBLE TO\npostgresql/large\tteam-a, team-b\n",
			request: `PUT /serviceplans/p1/visibility {"namespaces":[]}`},
		{args: []string{"quota", "visibility", "large"}, wantErr: `"large": name the plan as CLASS/PLAN, the external names of a cluster class and plan`},
		{args: []string{"quota", "visibility", "postgresql/nope"}, wantErr: `the cluster's service class "postgresql" offers no plan "nope"`},
		{args: []string{"quota", "visibility", "postgresql/large", "--all", "--none"}, wantErr: "if any flags in the group [namespaces none all] are set none of the others can be; [all none] were all set"},
	} {
		stdout, stderr, err := run(srv, tc.terminal, tc.args...)
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
		if tc.request != "" && !slices.Contains(srv.Requests, tc.request) {
			t.Errorf("%q: no request %s among %q", tc.args, tc.request, srv.Requests)
		}
	}
}

// run runs a command line of quota's verbs, as the root command would
// (the persistent -n and -o included).
func run(srv *clitest.Server, terminal bool, args ...string) (stdout, stderr string, err error) {
	f, st := srv.Factory(terminal)
	root := clitest.Root(f, NewCmd(f))
	root.SetArgs(args)
	err = root.Execute()
	return st.Out.String(), st.Err.String(), err
}
