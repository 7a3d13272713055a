package apiserver_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// svcat's table output, parsed so that an output can be compared with
// svcat's own golden files (cmd/svcat/testdata/output of its module) field
// by field: the goldens show Service Catalog's example objects, these
// tests Bindery's, so the layout (titles, keys, columns) must be the same
// and the values must be those of the objects shown.

// svcatDoc is one output: its blocks in order.
type svcatDoc struct {
	blocks []*svcatBlock
}

// svcatBlock is a part of an output: a details table (fields), a list
// table (header, rows) or other lines (text), under a title ("Plans:") or
// none.
type svcatBlock struct {
	title  string
	fields [][2]string
	header []string
	rows   [][]string
	text   []string
}

// shape is the block's layout: its title, keys and columns, without the
// values.
func (b *svcatBlock) shape() string {
	var s strings.Builder
	fmt.Fprintf(&s, "[%s]", b.title)
	for _, f := range b.fields {
		fmt.Fprintf(&s, " %s:", f[0])
	}
	if b.header != nil {
		fmt.Fprintf(&s, " columns %s", strings.Join(b.header, "|"))
	}
	return s.String()
}

func (d *svcatDoc) shape() []string {
	out := make([]string, 0, len(d.blocks))
	for _, b := range d.blocks {
		out = append(out, b.shape())
	}
	return out
}

// field is the value of key in the first block that has it.
func (d *svcatDoc) field(key string) (string, bool) {
	for _, b := range d.blocks {
		for _, f := range b.fields {
			if f[0] == key {
				return f[1], true
			}
		}
	}
	return "", false
}

// table is the first list table's block under title ("" for none).
func (d *svcatDoc) table(title string) *svcatBlock {
	for _, b := range d.blocks {
		if b.title == title && b.header != nil {
			return b
		}
	}
	return nil
}

// section is the block with the title.
func (d *svcatDoc) section(title string) *svcatBlock {
	for _, b := range d.blocks {
		if b.title == title {
			return b
		}
	}
	return nil
}

// column is the values of the list table's column named name, one per row.
func (b *svcatBlock) column(name string) []string {
	i := slices.Index(b.header, name)
	if i < 0 {
		return nil
	}
	out := make([]string, 0, len(b.rows))
	for _, r := range b.rows {
		out = append(out, r[i])
	}
	return out
}

// row is the list table's row whose column col holds value, as a map of
// column names to values.
func (b *svcatBlock) row(col, value string) map[string]string {
	i := slices.Index(b.header, col)
	for _, r := range b.rows {
		if i >= 0 && r[i] == value {
			m := make(map[string]string, len(r))
			for j, h := range b.header {
				m[h] = r[j]
			}
			return m
		}
	}
	return nil
}

var (
	// A list table's rule: + and - only, under its header.
	ruleLine = regexp.MustCompile(`^\+[-+]+\+?\s*$`)
	// A title: a line of its own, not indented, ending with a colon.
	titleLine = regexp.MustCompile(`^\S.*:$`)
	// A details table's line: indented, a key without colons, a colon,
	// then the value (which may hold colons).
	fieldLine = regexp.MustCompile(`^  ([^:]+?):(?:\s+(.*?))?\s*$`)
)

// parseSvcat parses svcat's output (tablewriter's tables, as
// cmd/svcat/output writes them).
func parseSvcat(out string) *svcatDoc {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	d := &svcatDoc{}
	cur := &svcatBlock{}
	var cols []int // a list table's column starts, from its rule
	flush := func() {
		if cur.title != "" || cur.fields != nil || cur.header != nil || cur.text != nil {
			d.blocks = append(d.blocks, cur)
		}
		cur, cols = &svcatBlock{}, nil
	}
	cells := func(line string) []string {
		out := make([]string, len(cols)-1)
		for i := range out {
			from, to := cols[i], cols[i+1]
			if from >= len(line) {
				continue
			}
			out[i] = strings.TrimSpace(line[from:min(to, len(line))])
		}
		return out
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		next := ""
		if i+1 < len(lines) {
			next = lines[i+1]
		}
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case ruleLine.MatchString(next):
			// A list table's header: the rule's + mark the columns.
			if cur.fields != nil || cur.text != nil {
				title := cur.title
				flush()
				cur.title = title
			}
			rule := strings.TrimRight(next, " ")
			for j, c := range rule {
				if c == '+' {
					cols = append(cols, j)
				}
			}
			if cols[len(cols)-1] != len(rule)-1 {
				cols = append(cols, len(rule))
			}
			cur.header = cells(line)
			i++
		case cols != nil:
			row := cells(line)
			if row[0] == "" && len(cur.rows) > 0 {
				// A wrapped cell continues the row above.
				prev := cur.rows[len(cur.rows)-1]
				for j, c := range row {
					if c != "" {
						prev[j] = strings.TrimSpace(prev[j] + " " + c)
					}
				}
				continue
			}
			cur.rows = append(cur.rows, row)
		case titleLine.MatchString(line):
			flush()
			cur.title = line
		case cur.title == "" && fieldLine.MatchString(line) && cur.text == nil:
			m := fieldLine.FindStringSubmatch(line)
			cur.fields = append(cur.fields, [2]string{m[1], m[2]})
		case !strings.HasPrefix(line, " "):
			// A message of its own ("deleted NAME", "Waiting for ...").
			flush()
			cur.text = []string{line}
			flush()
		default:
			// Anything else (parameters as YAML) is compared with its
			// spaces folded.
			cur.text = append(cur.text, strings.Join(strings.Fields(line), " "))
		}
	}
	flush()
	return d
}

// svcatGoldens is the directory of svcat v0.3.1's golden outputs, in the
// module cache (go mod download, which tools/svcat/build.sh ran).
func svcatGoldens(t testing.TB) string {
	t.Helper()
	return filepath.Join(serviceCatalogModule(t), "cmd", "svcat", "testdata", "output")
}

// serviceCatalogModule is where the module cache holds Service Catalog
// v0.3.1, downloaded outside any module so no go.mod is touched.
func serviceCatalogModule(t testing.TB) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/kubernetes-sigs/service-catalog@v0.3.1")
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download of service-catalog v0.3.1: %v", err)
	}
	m := regexp.MustCompile(`"Dir": "([^"]+)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("go mod download of service-catalog v0.3.1 gave no directory:\n%s", out)
	}
	return string(m[1])
}

// golden reads and parses svcat's golden output name.
func golden(t testing.TB, name string) *svcatDoc {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(svcatGoldens(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return parseSvcat(string(raw))
}

// TestParseSvcat checks the parser on svcat's own goldens, so that a
// comparison with them compares what they hold.
func TestParseSvcat(t *testing.T) {
	t.Parallel()
	d := golden(t, "describe-class.txt")
	if got, want := d.shape(), []string{
		"[] Name: Scope: Description: Kubernetes Name: Status: Tags: Broker:",
		"[Plans:] columns NAME|DESCRIPTION",
	}; !slices.Equal(got, want) {
		t.Errorf("describe-class.txt: %q, want %q", got, want)
	}
	if v, _ := d.field("Kubernetes Name"); v != "4f6e6cf6-ffdd-425f-a2c7-3c9258ad2468" {
		t.Errorf("describe-class.txt: Kubernetes Name %q", v)
	}
	if v, _ := d.field("Tags"); v != "" {
		t.Errorf("describe-class.txt: Tags %q", v)
	}
	if got := d.table("Plans:").column("DESCRIPTION"); !slices.Equal(got, []string{"Sample plan description", "Premium plan"}) {
		t.Errorf("describe-class.txt: plan descriptions %q", got)
	}

	plans := golden(t, "get-plans.txt").table("")
	if got := plans.column("DESCRIPTION"); len(got) != 5 ||
		got[3] != "Another sample plan description that's really really really really really, kinda, wide" {
		t.Errorf("get-plans.txt: wrapped descriptions %q", got)
	}
	if r := plans.row("CLASS", "another-provided-service"); r == nil || r["NAME"] != "default" {
		t.Errorf("get-plans.txt: row of another-provided-service %v", r)
	}

	inst := golden(t, "describe-instance.txt")
	if got, want := inst.shape(), []string{
		"[] Name: Namespace: Status: Class: Plan:",
		"[Parameters:]",
		"[Parameters From:]",
		"[Bindings:] columns NAME|STATUS",
	}; !slices.Equal(got, want) {
		t.Errorf("describe-instance.txt: %q, want %q", got, want)
	}
	if v, _ := inst.field("Status"); v != "Ready - The instance was provisioned successfully @ 2018-01-11 20:59:47 +0000 UTC" {
		t.Errorf("describe-instance.txt: Status %q", v)
	}
	if got := inst.section("Parameters:").text; !slices.Equal(got, []string{"param1: value1", "paramset:", "ps1: 1", "ps2: two"}) {
		t.Errorf("describe-instance.txt: parameters %q", got)
	}

	wait := golden(t, "provision-instance-and-wait.txt")
	if got := wait.shape(); len(got) != 4 || got[0] != "[]" || !strings.HasPrefix(got[1], "[] Name: Namespace:") {
		t.Errorf("provision-instance-and-wait.txt: %q", got)
	}
	if got := golden(t, "provision-instance.txt"); len(got.blocks[0].fields) != 5 || got.blocks[0].fields[2] != [2]string{"Status", ""} {
		t.Errorf("provision-instance.txt: %v", got.blocks[0].fields)
	}
}
