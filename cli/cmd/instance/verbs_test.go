package instance

import (
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/clitest"
)

const listed = `{"items":[
	{"id":"i1","name":"db","namespace":"team","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"},
	 "status":{"conditions":[{"type":"Ready","status":"True","reason":"ProvisionedSuccessfully"}]}},
	{"id":"i2","name":"cache","namespace":"team","spec":{"serviceClassExternalName":"redis","servicePlanExternalName":"one"},
	 "status":{"currentOperation":"Provision","conditions":[{"type":"Ready","status":"False","reason":"Provisioning"}]}}]}`

// TestVerbs runs instances, update and deprovision through their command
// lines against a scripted API and compares what they print exactly, to a
// pipe and to a terminal.
func TestVerbs(t *testing.T) {
	t.Parallel()
	srv := clitest.New(t).
		On("GET", "/instances?limit=1000&namespace=team", 200, listed).
		On("GET", "/instances?limit=1000", 200, `{"items":[]}`).
		On("GET", "/instances/db", 200, `{"id":"i1","name":"db","namespace":"team","spec":{"clusterServiceClassExternalName":"postgresql"}}`).
		On("PATCH", "/instances/db", 200, `{"id":"i1","name":"db","namespace":"team","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"standard"},
			"status":{"conditions":[{"type":"Ready","status":"True","reason":"ProvisionedSuccessfully"}]},"generation":2}`).
		On("DELETE", "/instances/db", 202, `{"id":"i1","name":"db","namespace":"team","deletionTimestamp":"2026-01-01T00:00:00Z"}`)
	for _, tc := range []struct {
		args             []string
		terminal         bool
		stdout, stderr   string
		request, wantErr string
	}{
		{args: []string{"instances", "-n", "team"}, stdout: "NAMESPACE\tNAME\tCLASS\tPLAN\tSTATUS\nteam\tdb\tpostgresql\tsmall\tReady\nteam\tcache\tredis\tone\tProvision in progress\n"},
		{args: []string{"instances", "-n", "team"}, terminal: true, stdout: "NAMESPACE   NAME    CLASS        PLAN    STATUS\n" +
			"team        db      postgresql   small   Ready\nteam        cache   redis        one     Provision in progress\n"},
		{args: []string{"instances", "-A", "-o", "yaml"}, stdout: "items: []\n"},
		{args: []string{"instances", "-A", "-o", "json"}, stdout: "{\n  \"items\": []\n}\n"},
		{args: []string{"instances", "-o", "xml"}, wantErr: `invalid argument "xml" for "-o, --output" flag: want one of table, json, yaml, env, dotenv, env-file`},
		{args: []string{"instances", "-o", "env"}, wantErr: "-o env: this command prints table, json, yaml"},
		{args: []string{"update", "db", "-n", "team", "-p", "standard"}, stdout: "NAMESPACE\tNAME\tCLASS\tPLAN\tSTATUS\nteam\tdb\tpostgresql\tstandard\tReady\n",
			request: `PATCH /instances/db?namespace=team {"spec":{"clusterServicePlanExternalName":"standard"}}`},
		{args: []string{"update", "db"}, wantErr: "nothing to change: give -p PLAN, --param KEY=VALUE or --params-json"},
		{args: []string{"deprovision", "db", "-n", "team"}, stderr: "instance team/db is being deprovisioned\n",
			stdout: "NAMESPACE\tNAME\tCLASS\tPLAN\tSTATUS\nteam\tdb\t\t\tDeleting\n", request: "DELETE /instances/db?namespace=team"},
	} {
		stdout, stderr, err := run(srv, tc.terminal, tc.args...)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if stdout != tc.stdout || stderr != tc.stderr {
			t.Errorf("%q:\nstdout %q\n  want %q\nstderr %q\n  want %q", tc.args, stdout, tc.stdout, stderr, tc.stderr)
		}
		if tc.request != "" && srv.Requests[len(srv.Requests)-1] != tc.request {
			t.Errorf("%q: request %s, want %s", tc.args, srv.Requests[len(srv.Requests)-1], tc.request)
		}
	}
}

// run runs a command line of this package's verbs, as the root command
// would (the persistent -n and -o included).
func run(srv *clitest.Server, terminal bool, args ...string) (stdout, stderr string, err error) {
	f, st := srv.Factory(terminal)
	root := clitest.Root(f, NewProvision(f, nil), NewList(f), NewUpdate(f, nil), NewDeprovision(f))
	root.SetArgs(args)
	err = root.Execute()
	return st.Out.String(), st.Err.String(), err
}
