package binding

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/joho/godotenv"
)

// pieces are what the random values are made of: what shells, docker and
// dotenv readers treat specially, attempts to run a command, and text
// that is not ASCII.
var pieces = []string{
	"a", "Z", "0", "_", "-", ".", "/", ":", "@", "%", "+", "=", ",", "~", "!", "*", "?", "[", "]", "{", "}", "#",
	" ", "\t", "\n", "\r", "\r\n", "`", "$", "\\", "'", "\"", ";", "&", "|", "(", ")", "<", ">",
	"$(touch pwned)", "`touch pwned`", "${HOME}", "$HOME", "';touch pwned;'", "\";touch pwned;\"", "\\n", "\\\\", "\\'",
	"é", "日本", "😀", "\u202e", "\u00a0", "\x1b[2J", "export X=1",
}

func randomValue(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// TestCredentialFormatsReadBack is a property test over random values:
// every value a format accepts reads back exactly in its consumer — a
// POSIX shell sourcing -o env and -o dotenv with `set -a; . ./file`,
// godotenv (the Go dotenv library, whose rules docker compose's follow)
// reading -o dotenv, docker's --env-file rules reading -o env-file — and
// no shell sourcing any of them runs anything (a command in a value would
// create the file "pwned"). What a format refuses, it refuses for a reason
// it names; -o env refuses nothing but NUL.
func TestCredentialFormatsReadBack(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal("no sh on PATH")
	}
	r := rand.New(rand.NewPCG(1, 2))
	const keys = 6
	for round := range 120 {
		creds := map[string]any{}
		for k := range keys {
			creds[fmt.Sprintf("bdy_t_%d", k)] = randomValue(r)
		}
		for _, format := range []string{"env", "dotenv", "env-file"} {
			accepted := map[string]any{}
			for k, v := range creds {
				if _, err := EnvFormat(format, map[string]any{k: v}); err == nil {
					accepted[k] = v
				} else if format == "env" {
					t.Fatalf("-o env refused %q: %v", v, err)
				} else if !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), "use -o") {
					t.Fatalf("-o %s refused %q without naming the key and another format: %v", format, v, err)
				}
			}
			if len(accepted) < len(creds) {
				if _, err := EnvFormat(format, creds); err == nil {
					t.Fatalf("-o %s wrote a file with a value it refuses alone", format)
				}
			}
			file, err := EnvFormat(format, accepted)
			if err != nil {
				t.Fatal(err)
			}
			checkReadBack(t, fmt.Sprintf("round %d -o %s", round, format), format, file, accepted)
		}
	}
}

func checkReadBack(t *testing.T, what, format string, file []byte, want map[string]any) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "creds"), file, 0o600); err != nil {
		t.Fatal(err)
	}
	got := sourced(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatalf("%s: sourcing the file ran a command:\n%s", what, file)
	}
	var read map[string]string
	switch format {
	case "dotenv":
		var err error
		if read, err = godotenv.UnmarshalBytes(file); err != nil {
			t.Fatalf("%s: godotenv: %v\n%s", what, err, file)
		}
	case "env-file":
		read = dockerEnvFile(t, file)
	}
	for k, v := range want {
		name := EnvName(k)
		if format != "env-file" && got[name] != v {
			t.Errorf("%s: the shell read %s=%q, want %q\n%s", what, name, got[name], v, file)
		}
		if read != nil && read[name] != v {
			t.Errorf("%s: the consumer read %s=%q, want %q\n%s", what, name, read[name], v, file)
		}
	}
}

// sourced runs a POSIX shell that sources dir/creds as people do and
// returns the variables it then exports.
func sourced(t *testing.T, dir string) map[string]string {
	t.Helper()
	cmd := exec.Command("sh", "-c", "set -a; . ./creds && env -0")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	vars := map[string]string{}
	for _, kv := range bytes.Split(out, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			vars[k] = v
		}
	}
	return vars
}

// dockerEnvFile reads a file as `docker run --env-file` does (docker/cli
// opts/envfile.go): lines split as bufio.ScanLines does (a CR before the
// LF dropped), leading blanks trimmed, blank and # lines skipped, the
// name up to the first =, which must hold no blank, and the rest of the
// line as it is.
func dockerEnvFile(t *testing.T, file []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(file))
	for sc.Scan() {
		line := strings.TrimLeftFunc(sc.Text(), unicode.IsSpace)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsFunc(name, unicode.IsSpace) {
			t.Fatalf("docker would refuse the line %q", line)
		}
		out[name] = value
	}
	return out
}

// TestCredentialFormatsRefuse: NUL in every format, a quote in dotenv, a
// line break or a shell metacharacter in env-file, and two keys that make
// the same variable, each named.
func TestCredentialFormatsRefuse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format string
		creds  map[string]any
		says   string
	}{
		{"env", map[string]any{"p": "a\x00b"}, "NUL"},
		{"dotenv", map[string]any{"p": "a\x00b"}, "NUL"},
		{"env-file", map[string]any{"p": "a\x00b"}, "NUL"},
		{"dotenv", map[string]any{"p": "it's"}, "single quote"},
		{"dotenv", map[string]any{"p": "a\rb"}, "carriage return"},
		{"env-file", map[string]any{"p": "a\nb"}, "line break"},
		{"env-file", map[string]any{"p": "a b"}, "metacharacters"},
		{"env-file", map[string]any{"p": "$(id)"}, "metacharacters"},
		{"env", map[string]any{"db-host": "a", "db_host": "b"}, "both become DB_HOST"},
	} {
		_, err := EnvFormat(tc.format, tc.creds)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("-o %s of %q: %v, want it refused saying %q", tc.format, tc.creds, err, tc.says)
		}
	}
	out, err := EnvFormat("env", map[string]any{"url": "a&b", "n": 3.5, "nested": map[string]any{"x": "<&>"}})
	if err != nil || string(out) != "export N='3.5'\nexport NESTED='{\"x\":\"<&>\"}'\nexport URL='a&b'\n" {
		t.Errorf("-o env: %v\n%s", err, out)
	}
}
