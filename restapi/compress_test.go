package restapi_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCompressedWhenAsked: lists and exports are sent gzip-compressed to a
// client that accepts it, and the same objects as plain JSON to one that
// does not; a binding's credentials are never compressed.
func TestCompressedWhenAsked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	createInstances(t, b.store, "team", "db", 60)
	b.registerBindery("bindery")
	bnd := b.must(201, b.do(b.admin, "POST", "/bindings", map[string]any{"name": "app", "namespace": "team",
		"spec": map[string]any{"instanceRef": map[string]any{"name": "db-1"}}}))
	if err := b.store.SetCredentials(context.Background(), bnd.str("id"), map[string]any{"password": strings.Repeat("pw", 4096)}); err != nil {
		t.Fatal(err)
	}
	// A transport that leaves Content-Encoding to the test.
	raw := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func(path string, gz bool, status ...int) (string, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", b.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+b.admin)
		if gz {
			req.Header.Set("Accept-Encoding", "zstd, gzip")
		}
		res, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body io.Reader = res.Body
		if res.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(res.Body)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			body = zr
		}
		out, err := io.ReadAll(body)
		want := http.StatusOK
		if len(status) > 0 {
			want = status[0]
		}
		if err != nil || res.StatusCode != want {
			t.Fatalf("%s: %d %v", path, res.StatusCode, err)
		}
		return res.Header.Get("Content-Encoding"), out
	}
	for _, path := range []string{"/instances?limit=50", "/export/instances"} {
		enc, zipped := get(path, true)
		if enc != "gzip" {
			t.Errorf("%s with gzip accepted: Content-Encoding %q", path, enc)
		}
		enc, plain := get(path, false)
		if enc != "" {
			t.Errorf("%s without gzip accepted: Content-Encoding %q", path, enc)
		}
		if strings.Count(string(zipped), `"name":"db-`) < 50 || strings.Count(string(zipped), `"name":"db-`) != strings.Count(string(plain), `"name":"db-`) {
			t.Errorf("%s: compressed and plain differ:\n%.300s\n%.300s", path, zipped, plain)
		}
	}
	// An error the handler of a compressed route returns still reaches
	// the client, whole.
	for _, gz := range []bool{true, false} {
		path := "/instances/00000000-0000-4000-8000-000000000000/events"
		_, body := get(path, gz, http.StatusNotFound)
		var e struct{ Message string }
		if json.Unmarshal(body, &e) != nil || e.Message == "" {
			t.Errorf("%s (gzip accepted: %v): %q", path, gz, body)
		}
	}
	enc, creds := get("/bindings/"+bnd.str("id")+"/credentials", true)
	var c map[string]any
	if enc != "" || json.Unmarshal(creds, &c) != nil || len(c["password"].(string)) != 8192 {
		t.Errorf("credentials with gzip accepted: Content-Encoding %q, %d bytes", enc, len(creds))
	}
}
