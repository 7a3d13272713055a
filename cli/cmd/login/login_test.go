package login

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/clitest"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/config"
)

// TestLogin runs `bindery login` through its command line against a
// scripted REST API: the token from BINDERY_TOKEN, standard input or the
// hidden --token, the address as people paste it, what is saved and
// printed, and the refusals.
func TestLogin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		args        []string // after the URL
		urlSuffix   string   // appended to the server's address
		env, stdin  string
		status      int    // the server's answer to the token check
		wantToken   string // saved; "" when login must fail
		wantErr     string
		wantUsage   bool
		wantRequest bool
	}{
		{name: "from standard input", stdin: "tok-stdin\n", status: 200, wantToken: "tok-stdin", wantRequest: true},
		{name: "from BINDERY_TOKEN over standard input", env: "tok-env", stdin: "tok-stdin\n", status: 200, wantToken: "tok-env", wantRequest: true},
		{name: "the hidden flag", args: []string{"--token", "tok-flag"}, status: 200, wantToken: "tok-flag", wantRequest: true},
		{name: "the web UI's address with /api/v1/", urlSuffix: "/api/v1/", stdin: "  tok-space  \n", status: 200, wantToken: "tok-space", wantRequest: true},
		{name: "a token the server refuses", stdin: "bad\n", status: 401, wantErr: "did not accept the token", wantRequest: true},
		{name: "no token at all", wantErr: "no token: set BINDERY_TOKEN or give it on standard input", wantUsage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := clitest.New(t).On("GET", "/brokers?limit=1", tc.status, `{"items":[]}`)
			f, st := srv.Factory(false)
			f.IO.In = strings.NewReader(tc.stdin)
			home := t.TempDir()
			env := map[string]string{"XDG_CONFIG_HOME": home, "BINDERY_TOKEN": tc.env}
			f.Getenv = func(k string) string { return env[k] }
			root := clitest.Root(f, NewCmd(f, nil))
			root.SetArgs(append([]string{"login", srv.URL() + tc.urlSuffix}, tc.args...))
			err := root.Execute()
			if got := len(srv.Requests) > 0; got != tc.wantRequest {
				t.Errorf("token checked with the server: %v, want %v (%v)", got, tc.wantRequest, srv.Requests)
			}
			if tc.wantToken == "" {
				var ue *cmdutil.UsageError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.As(err, &ue) != tc.wantUsage {
					t.Fatalf("error %v (usage error: %v), want one saying %q (usage error: %v)", err, errors.As(err, &ue), tc.wantErr, tc.wantUsage)
				}
				if _, err := os.Stat(home + "/bindery/config.yaml"); !os.IsNotExist(err) {
					t.Errorf("a configuration was saved after a failed login: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("login: %v\n%s", err, st.Err)
			}
			c, err := config.Load(f.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			if c.URL != srv.URL() || c.Token != tc.wantToken {
				t.Errorf("saved %q with token %q, want %q with %q", c.URL, c.Token, srv.URL(), tc.wantToken)
			}
			p, _ := config.Path(f.Getenv)
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("the configuration's mode: %v, %v; want 0600", fi.Mode(), err)
			}
			if want := "Logged in to " + srv.URL() + "; saved in " + p + "\n"; st.Err.String() != want || st.Out.Len() != 0 {
				t.Errorf("printed %q on stderr and %q on stdout, want %q and nothing", st.Err, st.Out, want)
			}
			if strings.Contains(st.Err.String(), tc.wantToken) {
				t.Error("the token was printed")
			}
		})
	}
}

// TestServerURL: what people paste becomes the server's base address;
// anything else is a usage error that says what to give.
func TestServerURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":          "http://127.0.0.1:8080",
		"http://127.0.0.1:8080/":         "http://127.0.0.1:8080",
		"http://127.0.0.1:8080/api/v1":   "http://127.0.0.1:8080",
		" https://b.example/api/v1/ ":    "https://b.example",
		"https://b.example/x/?q=1#frag":  "https://b.example/x",
		"https://b.example/x/api/v1?q=1": "https://b.example/x",
	} {
		if got, err := ServerURL(in); err != nil || got != want {
			t.Errorf("ServerURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "127.0.0.1:8080", "ftp://b.example", "http://", "http://%zz"} {
		var ue *cmdutil.UsageError
		if _, err := ServerURL(in); !errors.As(err, &ue) || !strings.Contains(err.Error(), "is not a Bindery address") {
			t.Errorf("ServerURL(%q): %v, want a usage error", in, err)
		}
	}
}
