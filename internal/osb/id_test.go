package osb

import (
	"strings"
	"testing"
)

func TestIDProblem(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"3f1c8f8e-5a3b-4c5e-9a55-6f1d2c7b8a01": "",
		strings.Repeat("x", 255):               "",
		strings.Repeat("x", 256):               "must be at most 255 bytes long, not 256",
		"":                                     "must not be empty",
		"a\x00b":                               "contains a NUL character",
		"\xff":                                 "is not valid UTF-8",
	} {
		if got := IDProblem(id); !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Errorf("IDProblem(%.20q) = %q, want %q", id, got, want)
		}
	}
}
