package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// TestCLI drives the command line client as a user would, through the
// binary: a named, namespaced, expiring token from `token create`, the
// servers as processes, then login, register, provision and bind with
// --wait, credentials as a .env file, token list and revoke, and the same
// binary called as the kubectl plugin.
func TestCLI(t *testing.T) {
	t.Parallel()
	dbURL, key := pgtest.New(t), keyring.Generate()
	env := brokerEnv(dbURL, key)
	config := t.TempDir()

	// cli runs the binary with a private configuration directory and
	// returns stdout, stderr and the exit code.
	// plugin is the binary under kubectl's plugin name.
	plugin := filepath.Join(t.TempDir(), "kubectl-bindery")
	if err := os.Symlink(os.Args[0], plugin); err != nil {
		t.Fatal(err)
	}
	cli := func(extra []string, args ...string) (string, string, int) {
		t.Helper()
		var err error
		var stdout, stderr strings.Builder
		if len(extra) > 0 && extra[0] == "plugin" {
			cmd := exec.Command(plugin, args...)
			cmd.Env = []string{runMainEnv + "=1", "PATH=" + os.Getenv("PATH"), "XDG_CONFIG_HOME=" + config}
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err = cmd.Run()
		} else {
			p := start(t, append(append([]string{"XDG_CONFIG_HOME=" + config}, env...), extra...), args...)
			err = p.wait(t)
			stdout.WriteString(p.stdout.String())
			stderr.WriteString(p.stderr.String())
		}
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), code
	}
	must := func(want int, args ...string) (string, string) {
		t.Helper()
		out, errOut, code := cli(nil, args...)
		if code != want {
			t.Fatalf("bindery %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out, errOut
	}

	out, _ := must(0, "token", "create", "--role", "admin")
	admin := strings.TrimSpace(out)
	out, _ = must(0, "token", "create", "--role", "developer", "--name", "team-dev", "--namespace", "team", "--namespace", "qa", "--expires-in", "1h")
	dev := strings.TrimSpace(out)
	if !strings.HasPrefix(dev, "bdy_") {
		t.Fatalf("token create printed %q", out)
	}
	_, errOut := must(2, "token", "create", "--role", "developer", "--expires-in", "-1h")
	if !strings.Contains(errOut, "--expires-in") {
		t.Errorf("a negative --expires-in: %s", errOut)
	}

	brokerURL := serving(t, start(t, env, "serve", "broker", "--listen", "127.0.0.1:0"), "serving the OSB API")
	catalogURL := serving(t, start(t, env, "serve", "catalog", "--listen", "127.0.0.1:0", "--broker-allow-loopback"), "serving the REST API")
	start(t, env, "serve", "controller", "--listen", "127.0.0.1:0", "--broker-allow-loopback")

	must(0, "login", catalogURL, "--token", admin)
	st, err := os.Stat(filepath.Join(config, "bindery", "config.yaml"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config.yaml: %v %v", err, st)
	}
	must(0, "brokers", "register", "bindery", brokerURL, "-u", "osb-user", "-p", "osb-password-1234")
	out, _ = must(0, "token", "list")
	for _, w := range []string{"team-dev", "developer", "qa,team"} {
		if !strings.Contains(out, w) {
			t.Errorf("token list lacks %q:\n%s", w, out)
		}
	}

	must(0, "login", catalogURL, "--token", dev)
	must(4, "brokers", "register", "other", brokerURL)
	must(4, "-n", "default", "provision", "db", "-c", "postgresql", "-p", "small")
	_, errOut = must(0, "-n", "team", "provision", "db", "-c", "postgresql", "-p", "small", "--wait")
	if !strings.Contains(errOut, "done in") {
		t.Errorf("provision --wait printed no outcome:\n%s", errOut)
	}
	must(0, "-n", "team", "bind", "app", "--instance", "db", "--wait")
	out, _ = must(0, "-n", "team", "credentials", "app", "-o", "dotenv")
	if !strings.Contains(out, "URI='postgresql://") {
		t.Errorf("credentials -o dotenv:\n%s", out)
	}
	must(3, "-n", "team", "describe", "binding", "nosuch")

	// The kubectl plugin is the same binary under another name.
	out, errOut, code := cli([]string{"plugin"}, "-n", "team", "instances")
	if code != 0 || !strings.Contains(out, "db") {
		t.Fatalf("kubectl-bindery instances: exit %d\n%s\n%s", code, out, errOut)
	}

	must(0, "-n", "team", "unbind", "app", "--wait")
	must(0, "-n", "team", "deprovision", "db", "--wait")

	must(0, "login", catalogURL, "--token", admin)
	must(0, "token", "revoke", "team-dev")
	// BINDERY_TOKEN overrides the saved admin token; the revoked one is refused.
	_, errOut, code = cli([]string{"BINDERY_TOKEN=" + dev}, "-n", "team", "instances")
	if code != 4 || !strings.Contains(errOut, "bindery login") {
		t.Fatalf("a revoked token: exit %d, want 4\n%s", code, errOut)
	}
}
