package export

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/clitest"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
)

const twoInstances = `{"id":"1","name":"db","namespace":"team-a","spec":{},"status":{}}
{"id":"2","name":"cache","namespace":"team-a","spec":{},"status":{}}
`

// TestExportVerb runs export's command lines against a scripted API and
// compares what they print and ask exactly.
func TestExportVerb(t *testing.T) {
	t.Parallel()
	rev := http.Header{"Bindery-Revision": {"42"}}
	srv := clitest.New(t).
		OnWith("GET", "/export/instances?labelSelector=team%3Da%2Ctier+in+%28db%29&namespace=team-a", 200, twoInstances, rev, 0).
		OnWith("GET", "/export/bindings", 200, "", rev, 0).
		OnWith("GET", "/export/brokers?namespace=team-a", 200, `{"id":"3","name":"mine","namespace":"team-a","spec":{},"status":{}}`+"\n", rev, 0).
		On("GET", "/export/instances?namespace=team-b", 403, `{"error":"forbidden","message":"This token is limited to namespace(s) team-a, not \"team-b\"."}`).
		On("GET", "/export/instances?labelSelector=a+b", 400, `{"error":"invalid","field":"labelSelector","message":"The label selector (labelSelector) is not valid: found 'b', expected: in, notin, =, ==, !=, gt, lt."}`)
	for _, tc := range []struct {
		args           []string
		stdout, stderr string
		request        string
		wantErr        string
	}{
		{args: []string{"export", "instances", "-n", "team-a", "-l", "team=a,tier in (db)"}, stdout: twoInstances,
			stderr: "2 instances exported (revision 42)\n", request: "GET /export/instances?labelSelector=team%3Da%2Ctier+in+%28db%29&namespace=team-a"},
		{args: []string{"export", "bindings"}, stdout: "", stderr: "0 bindings exported (revision 42)\n", request: "GET /export/bindings"},
		{args: []string{"export", "brokers", "-n", "team-a"}, stdout: `{"id":"3","name":"mine","namespace":"team-a","spec":{},"status":{}}` + "\n",
			stderr: "1 broker exported (revision 42)\n"},
		{args: []string{"export", "instances", "-n", "team-b"},
			wantErr: `This token is limited to namespace(s) team-a, not "team-b". Ask an admin for a token with that role or namespace (` + "`bindery token create`)."},
		{args: []string{"export", "instances", "-l", "a b"}, wantErr: "The label selector (labelSelector) is not valid: found 'b', expected: in, notin, =, ==, !=, gt, lt."},
		{args: []string{"export", "plans"}, wantErr: `"plans" cannot be exported: export instances, bindings or brokers`},
		{args: []string{"export", "instances", "-o", "json"}, wantErr: "export writes JSON, one object a line: -o does not apply"},
		{args: []string{"export"}, wantErr: "accepts 1 arg(s), received 0"},
	} {
		f, st := srv.Factory(false)
		root := clitest.Root(f, NewCmd(f, nil))
		root.SetArgs(tc.args)
		err := root.Execute()
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
		if st.Out.String() != tc.stdout || st.Err.String() != tc.stderr {
			t.Errorf("%q:\nstdout %q\n  want %q\nstderr %q\n  want %q", tc.args, st.Out.String(), tc.stdout, st.Err.String(), tc.stderr)
		}
		if tc.request != "" && !slices.Contains(srv.Requests, tc.request) {
			t.Errorf("%q: no request %s among %q", tc.args, tc.request, srv.Requests)
		}
	}
}

// TestExportCutShort: an export the server cuts short is an error that
// says so, after what came is written.
func TestExportCutShort(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(twoInstances))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	out := &strings.Builder{}
	errOut := &strings.Builder{}
	f := cmdutil.NewFactory(cmdutil.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut})
	f.Getenv = func(string) string { return "" }
	f.SetClient(api.New(srv.URL, "t"))
	root := clitest.Root(f, NewCmd(f, nil))
	root.SetArgs([]string{"export", "instances"})
	err := root.Execute()
	want := "the export was cut short after 2 objects (unexpected EOF): what was written is not all of it; run it again"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if out.String() != twoInstances || errOut.String() != "" {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
}
