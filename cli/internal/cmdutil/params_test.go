package cmdutil

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParams(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(`{"a": 1, "b": "x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pairs []string
		raw   string
		want  map[string]any
		usage bool
	}{
		{nil, "", nil, false},
		{[]string{"n=5", "s=text", "b=true", "o={\"k\":[1]}", "e="}, "", map[string]any{"n": 5.0, "s": "text", "b": true, "o": map[string]any{"k": []any{1.0}}, "e": ""}, false},
		{[]string{"b=y"}, "@" + file, map[string]any{"a": 1.0, "b": "y"}, false},
		{nil, `{"a": null}`, map[string]any{"a": nil}, false},
		{[]string{"novalue"}, "", nil, true},
		{[]string{"=v"}, "", nil, true},
		{nil, "[1]", nil, true},
		{nil, "null", nil, true},
		{nil, "@" + file + ".missing", nil, true},
	} {
		got, err := Params(tc.pairs, tc.raw)
		var u *UsageError
		if tc.usage != errors.As(err, &u) || (!tc.usage && err != nil) {
			t.Errorf("Params(%q, %q): error %v, want usage error %v", tc.pairs, tc.raw, err, tc.usage)
			continue
		}
		if !tc.usage && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Params(%q, %q) = %v, want %v", tc.pairs, tc.raw, got, tc.want)
		}
	}
}
