package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestConfigurationDoc fails when docs/configuration.md's configuration table is
// not what the commands' flags give: a flag added, removed or changed
// without `make docs`.
func TestConfigurationDoc(t *testing.T) {
	t.Parallel()
	want, err := configTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	updated, err := replaceConfig(readme, want)
	if err != nil {
		t.Fatalf("docs/configuration.md: %v", err)
	}
	if !bytes.Equal(readme, updated) {
		_, rest, _ := strings.Cut(string(readme), configBegin+"\n")
		got, _, _ := strings.Cut(rest, configEnd)
		t.Errorf("docs/configuration.md's configuration table is out of date: run `make docs`.\ngot:\n%s\nwant:\n%s", got, want)
	}
	// Every server's own flag is there, with its variable.
	for _, row := range []string{
		"| `--target-database-url` | `BINDERY_TARGET_DATABASE_URL` |",
		"| `--database-url` | `BINDERY_DATABASE_URL`, `DATABASE_URL` |",
		"| `--listen` | `BINDERY_LISTEN` | `:9443` | serve webhook |",
		"| `--cni-managed-cidrs` | `BINDERY_CNI_MANAGED_CIDRS` |",
	} {
		if !strings.Contains(want, row) {
			t.Errorf("the table lacks %q", row)
		}
	}
}

// TestReplaceConfig replaces only what is between the markers, and says
// when they are missing.
func TestReplaceConfig(t *testing.T) {
	t.Parallel()
	doc := "intro\n" + configBegin + "\nold | table\n" + configEnd + "\nrest\n"
	got, err := replaceConfig([]byte(doc), "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + configBegin + "\nnew\n" + configEnd + "\nrest\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"no markers\n", configBegin + "\nno end\n"} {
		if _, err := replaceConfig([]byte(bad), "x"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
