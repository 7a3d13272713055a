package binding

import (
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/clitest"
)

// TestVerbs runs bind, bindings, credentials and unbind through their
// command lines against a scripted API and compares what they print
// exactly.
func TestVerbs(t *testing.T) {
	t.Parallel()
	const app = `{"id":"a1","name":"app","namespace":"team","spec":{"instanceRef":{"name":"db"},"secretName":"app"},
		"status":{"conditions":[{"type":"Ready","status":"True","reason":"InjectedBindResult"}]}}`
	srv := clitest.New(t).
		On("POST", "/bindings", 201, `{"id":"a1","name":"app","namespace":"team","spec":{"instanceRef":{"name":"db"},"secretName":"app"},"status":{},
			"warnings":["No instance named \"db\" exists in namespace \"team\": the binding waits until it does."]}`).
		On("GET", "/bindings?limit=1000&namespace=team", 200, `{"items":[`+app+`]}`).
		On("GET", "/bindings/app/credentials", 200, `{"uri":"postgresql://u:p@h/db?a=1&b=2","port":5432,"tls":{"ca":"<pem>"}}`).
		On("DELETE", "/bindings/app", 202, app)
	for _, tc := range []struct {
		args           []string
		stdout, stderr string
		request        string
		wantErr        string
	}{
		{args: []string{"bind", "app", "-n", "team", "--instance", "db", "--param", "ro=true"},
			stdout:  "NAMESPACE\tNAME\tINSTANCE\tSECRET\tSTATUS\nteam\tapp\tdb\tapp\tPending\n",
			stderr:  "warning: No instance named \"db\" exists in namespace \"team\": the binding waits until it does.\n",
			request: `POST /bindings {"name":"app","namespace":"team","spec":{"instanceRef":{"name":"db"},"parameters":{"ro":true}}}`},
		{args: []string{"bind", "app"}, wantErr: "--instance is required: the instance to bind (`bindery instances` lists them)"},
		{args: []string{"bindings", "-n", "team"}, stdout: "NAMESPACE\tNAME\tINSTANCE\tSECRET\tSTATUS\nteam\tapp\tdb\tapp\tReady\n"},
		{args: []string{"credentials", "app", "-n", "team", "-o", "json"},
			stdout: "{\n  \"port\": 5432,\n  \"tls\": {\n    \"ca\": \"<pem>\"\n  },\n  \"uri\": \"postgresql://u:p@h/db?a=1&b=2\"\n}\n"},
		{args: []string{"credentials", "app", "-n", "team"}, stdout: "port: 5432\ntls:\n  ca: <pem>\nuri: postgresql://u:p@h/db?a=1&b=2\n"},
		{args: []string{"credentials", "app", "-n", "team", "-o", "env"},
			stdout: "export PORT='5432'\nexport TLS='{\"ca\":\"<pem>\"}'\nexport URI='postgresql://u:p@h/db?a=1&b=2'\n"},
		{args: []string{"credentials", "app", "-n", "team", "-o", "dotenv"},
			stdout: "PORT='5432'\nTLS='{\"ca\":\"<pem>\"}'\nURI='postgresql://u:p@h/db?a=1&b=2'\n"},
		{args: []string{"credentials", "app", "-n", "team", "-o", "env-file"},
			wantErr: `the value of "tls" holds blanks or shell metacharacters (a shell sourcing the file would act on them), which -o env-file cannot carry exactly: use -o env or -o dotenv (docker compose's env_file reads -o dotenv)`},
		{args: []string{"credentials", "app", "-n", "team", "-o", "table"}, wantErr: "-o table: this command prints json, yaml, env, dotenv, env-file"},
		{args: []string{"unbind", "app", "-n", "team"}, stderr: "binding team/app is being unbound\n",
			stdout: "NAMESPACE\tNAME\tINSTANCE\tSECRET\tSTATUS\nteam\tapp\tdb\tapp\tReady\n", request: "DELETE /bindings/app?namespace=team"},
	} {
		f, st := srv.Factory(false)
		root := clitest.Root(f, NewBind(f, nil), NewList(f), NewCredentials(f, nil), NewUnbind(f))
		root.SetArgs(tc.args)
		err := root.Execute()
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%q: err %v\nwant %s", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if st.Out.String() != tc.stdout || st.Err.String() != tc.stderr {
			t.Errorf("%q:\nstdout %q\n  want %q\nstderr %q\n  want %q", tc.args, st.Out.String(), tc.stdout, st.Err.String(), tc.stderr)
		}
		if tc.request != "" && srv.Requests[len(srv.Requests)-1] != tc.request {
			t.Errorf("%q: request %s, want %s", tc.args, srv.Requests[len(srv.Requests)-1], tc.request)
		}
	}
}

// TestCredentialsKeepNumbersAsSent: credentials print numbers as the
// broker sent them, in every format. Decoded as float64, an account id
// past 2^53 lost its last digits (12345678901234567891 printed as
// 12345678901234567000) and 1e21 printed as 1e+21.
func TestCredentialsKeepNumbersAsSent(t *testing.T) {
	t.Parallel()
	srv := clitest.New(t).On("GET", "/bindings/app/credentials", 200,
		`{"account_id":12345678901234567891,"ratio":1e21,"nested":{"big":-98765432109876543210,"f":1.50},"list":[1e-7,3]}`)
	for format, want := range map[string]string{
		"json": "{\n  \"account_id\": 12345678901234567891,\n  \"list\": [\n    1e-7,\n    3\n  ],\n" +
			"  \"nested\": {\n    \"big\": -98765432109876543210,\n    \"f\": 1.50\n  },\n  \"ratio\": 1e21\n}\n",
		"yaml": "account_id: 12345678901234567891\nlist:\n- 1e-7\n- 3\nnested:\n  big: -98765432109876543210\n  f: 1.50\nratio: 1e21\n",
		"env": "export ACCOUNT_ID='12345678901234567891'\nexport LIST='[1e-7,3]'\n" +
			"export NESTED='{\"big\":-98765432109876543210,\"f\":1.50}'\nexport RATIO='1e21'\n",
	} {
		f, st := srv.Factory(false)
		root := clitest.Root(f, NewCredentials(f, nil))
		root.SetArgs([]string{"credentials", "app", "-o", format})
		if err := root.Execute(); err != nil {
			t.Errorf("-o %s: %v", format, err)
			continue
		}
		if st.Out.String() != want {
			t.Errorf("-o %s:\n%s\nwant\n%s", format, st.Out.String(), want)
		}
	}
}
