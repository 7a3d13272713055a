package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/clitest"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/wait"
)

const (
	ready  = `{"id":"b1","name":"db","spec":{"url":"http://db.example"},"status":{"serviceClassCount":1,"servicePlanCount":3,"conditions":[{"type":"Ready","status":"True","reason":"FetchedCatalog","message":"Successfully fetched catalog entries from broker."}]}}`
	broken = `{"id":"b2","name":"gone","spec":{"url":"http://127.0.0.1:1"},"status":{"conditions":[{"type":"Ready","status":"False","reason":"ErrorFetchingCatalog","message":"Bindery could not fetch the catalogue of broker gone. Nothing answers at 127.0.0.1:1 (connection refused): check the URL and that the broker is running. Bindery tries again at 2026-01-01T00:00:05Z (attempt 1)."}]}}`
	fresh  = `{"id":"b3","name":"later","spec":{"url":"http://later.example"},"status":{}}`
)

// TestVerbs runs the brokers verbs through their command lines against a
// scripted API and compares what they print exactly; a first catalogue
// fetch that failed is exit code 5's error, in words.
func TestVerbs(t *testing.T) {
	t.Parallel()
	srv := clitest.New(t).
		On("POST", "/brokers?wait=false", 201, fresh).
		Once("POST", "/brokers", 201, ready).
		On("POST", "/brokers", 201, broken).
		On("GET", "/brokers", 200, `{"items":[`+ready+`,`+broken+`]}`).
		On("POST", "/brokers/gone/relist", 200, broken).
		On("DELETE", "/brokers/db", 204, "")
	const header = "NAME\tURL\tSTATUS\tCLASSES\tPLANS\tMESSAGE\n"
	for _, tc := range []struct {
		args    []string
		stdout  string
		request string
		failed  string
	}{
		{args: []string{"brokers", "register", "db", "http://db.example", "-u", "u", "-p", "secret"},
			stdout:  header + "db\thttp://db.example\tReady\t1\t3\tSuccessfully fetched catalog entries from broker.\n",
			request: `POST /brokers {"auth":{"basic":{"password":"secret","username":"u"}},"name":"db","url":"http://db.example"}`},
		{args: []string{"brokers", "register", "gone", "http://127.0.0.1:1"},
			stdout: header + "gone\thttp://127.0.0.1:1\tUnreachable\t0\t0\tBindery could not fetch the catalogue of broker gone. Nothing answers at 127.0.0.1:1 (connection refused): check the URL and that the broker is running. Bindery tries again at 2026-01-01T00:00:05Z (attempt 1).\n",
			failed: "broker gone is registered, but its catalogue was not fetched: Bindery could not fetch the catalogue of broker gone. Nothing answers at 127.0.0.1:1 (connection refused): check the URL and that the broker is running. Bindery tries again at 2026-01-01T00:00:05Z (attempt 1).\n" +
				"It is fetched again with backoff; `bindery brokers relist gone` tries now."},
		{args: []string{"brokers", "register", "later", "http://later.example", "--no-wait", "--bearer-token", "t"},
			stdout: header + "later\thttp://later.example\tPending\t0\t0\t-\n", request: `POST /brokers?wait=false {"auth":{"bearer":{"token":"t"}},"name":"later","url":"http://later.example"}`},
		{args: []string{"brokers", "list"}, stdout: header + "db\thttp://db.example\tReady\t1\t3\tSuccessfully fetched catalog entries from broker.\n" +
			"gone\thttp://127.0.0.1:1\tUnreachable\t0\t0\tBindery could not fetch the catalogue of broker gone. Nothing answers at 127.0.0.1:1 (connection refused): check the URL and that the broker is running. Bindery tries again at 2026-01-01T00:00:05Z (attempt 1).\n"},
		{args: []string{"brokers", "list", "-o", "json"}, request: "GET /brokers?limit=1000"},
		{args: []string{"brokers", "relist", "gone"}, failed: "the catalogue of broker gone could not be fetched: Bindery could not fetch the catalogue of broker gone. Nothing answers at 127.0.0.1:1 (connection refused): check the URL and that the broker is running. Bindery tries again at 2026-01-01T00:00:05Z (attempt 1)."},
		{args: []string{"brokers", "deregister", "db"}, stdout: "broker db deregistered\n", request: "DELETE /brokers/db"},
	} {
		f, st := srv.Factory(false)
		root := clitest.Root(f, NewCmd(f))
		root.SetArgs(tc.args)
		err := root.Execute()
		switch {
		case tc.failed != "":
			if !errors.Is(err, wait.ErrFailed) || err.Error() != tc.failed {
				t.Errorf("%q: err %v\nwant %s", tc.args, err, tc.failed)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if tc.stdout != "" && st.Out.String() != tc.stdout {
			t.Errorf("%q:\nstdout %q\n  want %q", tc.args, st.Out.String(), tc.stdout)
		}
		if tc.request != "" && srv.Requests[len(srv.Requests)-1] != tc.request {
			t.Errorf("%q: request %s, want %s", tc.args, srv.Requests[len(srv.Requests)-1], tc.request)
		}
	}
}

// TestRegisterReadsSecretsFromStandardInput: the broker's password (-u
// without -p) and bearer token (--bearer-token-stdin) come from standard
// input, as login's token does, so that neither ps nor the shell's
// history shows them; with nothing there the command refuses before any
// request.
func TestRegisterReadsSecretsFromStandardInput(t *testing.T) {
	t.Parallel()
	srv := clitest.New(t).On("POST", "/brokers", 201, ready)
	for _, tc := range []struct {
		args    []string
		stdin   string
		request string
		usage   string
	}{
		{args: []string{"-u", "u"}, stdin: "s3cret pass\n",
			request: `POST /brokers {"auth":{"basic":{"password":"s3cret pass","username":"u"}},"name":"db","url":"http://db.example"}`},
		{args: []string{"--bearer-token-stdin"}, stdin: "tok\n",
			request: `POST /brokers {"auth":{"bearer":{"token":"tok"}},"name":"db","url":"http://db.example"}`},
		{args: []string{"-u", "u"}, usage: "no password for broker user u: give it on standard input"},
		{args: []string{"--bearer-token-stdin"}, usage: "no bearer token: give it on standard input"},
		{args: []string{"--bearer-token-stdin", "-u", "u"}, stdin: "x\n", usage: "--username and --bearer-token-stdin: give one kind of broker credentials"},
	} {
		f, _ := srv.Factory(false)
		f.IO.In = strings.NewReader(tc.stdin)
		root := clitest.Root(f, NewCmd(f))
		root.SetArgs(append([]string{"brokers", "register", "db", "http://db.example"}, tc.args...))
		before := len(srv.Requests)
		err := root.Execute()
		var u *cmdutil.UsageError
		switch {
		case tc.usage != "":
			if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.usage) || len(srv.Requests) != before {
				t.Errorf("%q: %v (%d requests), want the usage error %q before any request", tc.args, err, len(srv.Requests)-before, tc.usage)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case srv.Requests[len(srv.Requests)-1] != tc.request:
			t.Errorf("%q: request %s, want %s", tc.args, srv.Requests[len(srv.Requests)-1], tc.request)
		}
	}
}
