package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// svcat runs Service Catalog's own command line, v0.3.1, as a user with a
// kubeconfig would.
type svcat struct {
	bin, kubeconfig, home string
}

// newSvcat finds bin/svcat (tools/svcat/build.sh, or the directory of
// kubetest.EnvBin) and runs it with kubeconfig, in a home of its own.
func newSvcat(t testing.TB, kubeconfig string) *svcat {
	t.Helper()
	dir := os.Getenv(kubetest.EnvBin)
	if dir == "" {
		dir = filepath.Join("..", "bin")
	}
	bin, err := filepath.Abs(filepath.Join(dir, "svcat"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("svcat is missing from %s: run tools/svcat/build.sh (make kube) to build it", dir)
	}
	return &svcat{bin: bin, kubeconfig: kubeconfig, home: t.TempDir()}
}

// run runs svcat with args; stdin answers its prompts. It returns the
// standard output, and an error with the standard error when svcat fails.
func (s *svcat) run(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, append([]string{"--kubeconfig", s.kubeconfig}, args...)...)
	cmd.Env = []string{"HOME=" + s.home, "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("svcat %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// must runs svcat with args and fails the test when it fails.
func (s *svcat) must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.run("", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// upsCatalog is the catalog of Service Catalog's user-provided-service
// broker (contrib/pkg/broker/user_provided), which its walkthrough
// registers and svcat's golden files show: the same ids, names and
// descriptions, so that the outputs can match the goldens value for value.
func upsCatalog() []osbtest.Service {
	free, paid := true, false
	str := func(description string) map[string]any {
		return map[string]any{"description": description, "type": "string"}
	}
	params := map[string]any{
		"$schema": "http://json-schema.org/draft-04/schema#",
		"type":    "object",
		"properties": map[string]any{
			"param-1": str("First input parameter"),
			"param-2": str("Second input parameter"),
		},
	}
	return []osbtest.Service{{
		ID: "4f6e6cf6-ffdd-425f-a2c7-3c9258ad2468", Name: "user-provided-service", Description: "A user provided service",
		Bindable: true, PlanUpdateable: true,
		Plans: []osbtest.Plan{
			{ID: "86064792-7ea2-467b-af93-ac9694d96d52", Name: "default", Description: "Sample plan description", Free: &free},
			{ID: "cc0d7529-18e8-416d-8946-6f7456acd589", Name: "premium", Description: "Premium plan", Free: &paid},
		},
	}, {
		ID: "5f6e6cf6-ffdd-425f-a2c7-3c9258ad2468", Name: "user-provided-service-single-plan", Description: "A user provided service",
		Bindable: true, PlanUpdateable: true,
		Plans: []osbtest.Plan{
			{ID: "96064792-7ea2-467b-af93-ac9694d96d52", Name: "default", Description: "Sample plan description", Free: &free},
		},
	}, {
		ID: "8a6229d4-239e-4790-ba1f-8367004d0473", Name: "user-provided-service-with-schemas", Description: "A user provided service",
		Bindable: true, PlanUpdateable: true,
		Plans: []osbtest.Plan{{
			ID: "4dbcd97c-c9d2-4c6b-9503-4401a789b558", Name: "default", Description: "Plan with parameter and response schemas", Free: &free,
			Schemas: &osbtest.Schemas{
				ServiceInstance: &osbtest.ServiceInstanceSchema{
					Create: &osbtest.InputParameters{Parameters: params},
					Update: &osbtest.InputParameters{Parameters: params},
				},
				ServiceBinding: &osbtest.ServiceBindingSchema{Create: &osbtest.InputParameters{Parameters: params}},
			},
		}},
	}}
}

// upsCredentials are the credentials svcat's goldens show for a binding.
func upsCredentials(string, string) map[string]any {
	return map[string]any{"special-key-1": "special-value-1", "special-key-2": "special-value-2"}
}

// svcatTime is how svcat prints a condition's time.
const svcatTime = `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000 UTC`

// sameShape fails when out's layout (titles, keys, columns) is not that
// of svcat's golden file name.
func sameShape(t testing.TB, name, out string) *svcatDoc {
	t.Helper()
	got, want := parseSvcat(out), golden(t, name)
	if !slices.Equal(got.shape(), want.shape()) {
		t.Errorf("%s: layout\n%q\nsvcat's golden has\n%q\noutput:\n%s", name, got.shape(), want.shape(), out)
	}
	return got
}

// wantGolden compares out with svcat's golden file name value for value,
// statuses as checkStatus does.
func wantGolden(t testing.TB, name, out string) {
	t.Helper()
	wantGoldenExcept(t, name, out, nil)
}

// wantGoldenExcept is wantGolden but for the details fields of except,
// whose values for this output it gives where the golden's object
// differs.
func wantGoldenExcept(t testing.TB, name, out string, except map[string]string) {
	t.Helper()
	compareDocs(t, name, parseSvcat(out), golden(t, name), except)
}

// compareDocs is wantGoldenExcept on parsed outputs.
func compareDocs(t testing.TB, name string, got, want *svcatDoc, except map[string]string) {
	t.Helper()
	if !slices.Equal(got.shape(), want.shape()) {
		t.Errorf("%s: layout\n%q\nsvcat's golden has\n%q", name, got.shape(), want.shape())
		return
	}
	for i, w := range want.blocks {
		g := got.blocks[i]
		for j, f := range w.fields {
			key, v := f[0], g.fields[j][1]
			wv, ok := except[key]
			switch {
			case ok:
				if v != wv {
					t.Errorf("%s: %s is %q, want %q", name, key, v, wv)
				}
			case key == "Status":
				checkStatus(t, name, v, f[1])
			case v != f[1]:
				t.Errorf("%s: %s is %q, svcat's golden has %q", name, key, v, f[1])
			}
		}
		if len(g.rows) != len(w.rows) {
			t.Errorf("%s: %s rows %q, svcat's golden has %q", name, w.title, g.rows, w.rows)
		} else {
			for r, row := range w.rows {
				for c, cell := range row {
					switch got := g.rows[r][c]; {
					case w.header[c] == "STATUS":
						checkStatus(t, name, got, cell)
					case got != cell:
						t.Errorf("%s: %s row %d column %s is %q, svcat's golden has %q", name, w.title, r, w.header[c], got, cell)
					}
				}
			}
		}
		if !slices.Equal(g.text, w.text) {
			t.Errorf("%s: %s says %q, svcat's golden %q", name, w.title, g.text, w.text)
		}
	}
}

// statusTime is the time svcat appends to a status.
var statusTime = regexp.MustCompile(` @ ` + svcatTime + `$`)

// checkStatus compares a status svcat shows with the one Service Catalog
// showed for the same state (the golden's, or one of its controller's
// conditions), any time apart. Its failures say "status": they are about
// the conditions Bindery writes, not the layout.
func checkStatus(t testing.TB, name, got, want string) {
	t.Helper()
	if statusTime.MatchString(want) != statusTime.MatchString(got) ||
		statusTime.ReplaceAllString(got, "") != statusTime.ReplaceAllString(want, "") {
		t.Errorf("%s: status %q, Service Catalog showed %q", name, got, want)
	}
}

// wantStatus compares the Status field of d with the golden's.
func wantStatus(t testing.TB, name string, d, golden *svcatDoc) {
	t.Helper()
	got, _ := d.field("Status")
	want, _ := golden.field("Status")
	checkStatus(t, name, got, want)
}

// wantFields compares a details table's values: want maps keys to values,
// or to regular expressions written as /re/.
func wantFields(t testing.TB, name string, d *svcatDoc, want map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		got, ok := d.field(k)
		if !ok {
			t.Errorf("%s: no field %s", name, k)
			continue
		}
		if !matches(want[k], got) {
			t.Errorf("%s: %s is %q, want %q", name, k, got, want[k])
		}
	}
}

// wantRows compares a list table's rows (in order) with want, each a row
// of values or /regular expressions/ per column.
func wantRows(t testing.TB, name string, b *svcatBlock, want [][]string) {
	t.Helper()
	if b == nil {
		t.Errorf("%s: no table", name)
		return
	}
	if len(b.rows) != len(want) {
		t.Errorf("%s: %d rows %q, want %d %q", name, len(b.rows), b.rows, len(want), want)
		return
	}
	for i, row := range want {
		for j, w := range row {
			switch got := b.rows[i][j]; {
			case b.header[j] == "STATUS":
				checkStatus(t, name, got, w)
			case !matches(w, got):
				t.Errorf("%s: row %d column %s is %q, want %q", name, i, b.header[j], got, w)
			}
		}
	}
}

// wantRowSet is wantRows in any order: Bindery lists classes and plans in
// their brokers' order, instances and bindings by namespace and name.
func wantRowSet(t testing.TB, name string, b *svcatBlock, want [][]string) {
	t.Helper()
	if b == nil {
		t.Errorf("%s: no table", name)
		return
	}
	status := slices.Index(b.header, "STATUS")
	same := func(row, w []string) bool {
		for j, c := range w {
			if j != status && !matches(c, row[j]) {
				return false
			}
		}
		return true
	}
	left := slices.Clone(b.rows)
	for _, w := range want {
		i := slices.IndexFunc(left, func(row []string) bool { return same(row, w) })
		if i < 0 {
			t.Errorf("%s: no row %q among %q", name, w, b.rows)
			continue
		}
		if status >= 0 && status < len(w) {
			checkStatus(t, name, left[i][status], w[status])
		}
		left = slices.Delete(left, i, i+1)
	}
	if len(left) > 0 {
		t.Errorf("%s: rows %q, beyond %q", name, left, want)
	}
}

// wantGoldenSecret is wantGolden for svcat describe binding, whose Secret
// Data holds the golden's keys and extra's (with their values, or their
// lengths when the golden shows lengths).
func wantGoldenSecret(t testing.TB, name, out string, extra map[string]string) {
	t.Helper()
	want := golden(t, name)
	data := want.section("Secret Data:")
	lines := slices.Clone(data.text)
	for k, v := range extra {
		if strings.HasSuffix(lines[0], " bytes") {
			v = fmt.Sprintf("%d bytes", len(v))
		}
		lines = append(lines, k+" "+v)
	}
	sort.Strings(lines)
	got := parseSvcat(out)
	if s := got.section("Secret Data:"); s == nil || !slices.Equal(s.text, lines) {
		t.Errorf("%s: Secret Data %v, want %q", name, s, lines)
	}
	// The rest as the golden has it.
	trimmed := strings.Split(out, "\nSecret Data:\n")[0]
	wantNoSecret := *want
	wantNoSecret.blocks = slices.DeleteFunc(slices.Clone(want.blocks), func(b *svcatBlock) bool { return b == data })
	compareDocs(t, name, parseSvcat(trimmed), &wantNoSecret, nil)
}

func matches(want, got string) bool {
	if len(want) > 1 && strings.HasPrefix(want, "/") && strings.HasSuffix(want, "/") {
		return regexp.MustCompile("^(?:" + want[1:len(want)-1] + ")$").MatchString(got)
	}
	return want == got
}

// sameDocument compares svcat's -o json or -o yaml output with its golden
// file name field by field: every field of the golden must be there with
// the same value (a zero value may be left out, as Bindery's types omit
// empty fields), except the fields under the prefixes of differ, which
// only must be there (ids, times, names of another object), and those
// under leftOut, which Bindery does not have
// (apis/servicecatalog/README.md says which and why).
func sameDocument(t testing.TB, name, out string, differ, leftOut []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(svcatGoldens(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	decode := func(b []byte, v any) error { return json.Unmarshal(b, v) }
	if strings.HasSuffix(name, ".yaml") {
		decode = func(b []byte, v any) error { return yaml.Unmarshal(b, v) }
	}
	if err := decode(raw, &want); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := decode([]byte(out), &got); err != nil {
		t.Fatalf("%s: output: %v\n%s", name, err, out)
	}
	under := func(p string, prefixes []string) bool {
		for _, pre := range prefixes {
			if p == pre || strings.HasPrefix(p, pre+".") || strings.HasPrefix(p, pre+"[") {
				return true
			}
		}
		return false
	}
	gotLeaves := leaves(got, "")
	for p, w := range leaves(want, "") {
		if under(p, leftOut) {
			continue
		}
		g, ok := gotLeaves[p]
		switch {
		case !ok && isZero(w):
		case !ok:
			t.Errorf("%s: no %s (svcat's golden has %v)", name, p, w)
		case under(p, differ):
		case fmt.Sprint(g) != fmt.Sprint(w):
			t.Errorf("%s: %s is %v, svcat's golden has %v", name, p, g, w)
		}
	}
}

// leaves flattens a JSON document into its leaf values by path
// (spec.plans[0].name).
func leaves(v any, path string) map[string]any {
	out := map[string]any{}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			for p, l := range leaves(e, join(k)) {
				out[p] = l
			}
		}
	case []any:
		for i, e := range x {
			for p, l := range leaves(e, fmt.Sprintf("%s[%d]", path, i)) {
				out[p] = l
			}
		}
	default:
		out[path] = v
	}
	return out
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case float64:
		return x == 0
	case string:
		return x == ""
	}
	return false
}
