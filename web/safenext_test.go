package web

import (
	"strings"
	"testing"
)

// TestSafeNext: a post-sign-in destination stays on this site. Browsers
// drop tabs and newlines from URLs and read a backslash as a slash, so
// "/\t/evil.example" and "/\\evil.example" are other sites' addresses. A
// destination past maxNext is no page here.
func TestSafeNext(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"/instances/db?namespace=team":       "/instances/db?namespace=team",
		"/":                                  "/",
		"":                                   "/",
		"instances":                          "/",
		"//evil.example/path":                "/",
		"/\\evil.example/path":               "/",
		"/\t/evil.example/path":              "/",
		"/\n/evil.example":                   "/",
		"/\r/evil.example":                   "/",
		"/path\\..\\x":                       "/",
		"/ok\x7f":                            "/",
		"/ok\u0085":                          "/",
		"/\x00":                              "/",
		"https://evil.example/":              "/",
		"/%09/evil.example":                  "/%09/evil.example", // still escaped: a path on this site
		"/" + strings.Repeat("a", maxNext-1): "/" + strings.Repeat("a", maxNext-1),
		"/" + strings.Repeat("a", maxNext):   "/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
