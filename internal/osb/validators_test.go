package osb

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestCatalogValidators: a catalogue comes with its digest and the
// broker's ETag, kept only when it is one entity tag that can be sent
// back; asked with it, a 304 says Same; a 304 for another tag, or to a
// fetch that named none, is not the document kept. A Last-Modified is
// never sent back (Fetched says why).
func TestCatalogValidators(t *testing.T) {
	doc := `{"services":[{"id":"a","name":"a","description":"d","bindable":true,"plans":[{"id":"a-p","name":"p","description":"d"}]}]}`
	var asked http.Header
	etag, answered := `"v1"`, `"v1"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.Header.Clone()
		w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		if r.Header.Get("If-None-Match") != "" && r.Header.Get("If-None-Match") == etag {
			w.Header().Set("ETag", answered)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		_, _ = w.Write([]byte(doc))
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{URL: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cat, err := c.Catalog(ctx, Fetched{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(doc))
	if cat.Same || cat.NotModified || cat.Len() != 1 || string(cat.Digest) != string(sum[:]) || cat.ETag != `"v1"` {
		t.Fatalf("first fetch: Same %v, NotModified %v, %d services, digest %x (want %x), ETag %q", cat.Same, cat.NotModified, cat.Len(), cat.Digest, sum, cat.ETag)
	}
	if asked.Get("If-None-Match") != "" {
		t.Errorf("a fetch without an ETag sent If-None-Match %q", asked.Get("If-None-Match"))
	}
	again, err := c.Catalog(ctx, Fetched{ETag: cat.ETag, Digest: cat.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Same || !again.NotModified || again.ETag != `"v1"` || string(again.Digest) != string(sum[:]) ||
		asked.Get("If-None-Match") != `"v1"` || asked.Get("If-Modified-Since") != "" {
		t.Errorf("asked with the ETag: Same %v, NotModified %v, ETag %q, digest %x; sent If-None-Match %q, If-Modified-Since %q",
			again.Same, again.NotModified, again.ETag, again.Digest, asked.Get("If-None-Match"), asked.Get("If-Modified-Since"))
	}
	// A 304 that names another tag: fetched again without one.
	answered = `"v2"`
	if got, err := c.Catalog(ctx, Fetched{ETag: cat.ETag, Digest: cat.Digest}); err != nil || got.NotModified || !got.Same || asked.Get("If-None-Match") != "" {
		t.Errorf("a 304 for another tag: %+v, %v; want the document fetched again (Same by its digest)", got, err)
	}
	answered = `W/"v1"` // the same tag, weak: RFC 7232's weak comparison
	if got, err := c.Catalog(ctx, Fetched{ETag: cat.ETag, Digest: cat.Digest}); err != nil || !got.NotModified {
		t.Errorf("a 304 for the same tag, weak: %+v, %v; want NotModified", got, err)
	}
	for _, bad := range []string{"*", `"a", "b"`, `"a"b"`, "v1", `W/v1`, `""x`, "\"v\tw\"", `"` + strings.Repeat("x", 300) + `"`, "\"caf\xc3\xa9\""} {
		etag = bad
		got, err := c.Catalog(ctx, Fetched{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ETag != "" {
			t.Errorf("ETag %q kept; it is not one entity tag that can be sent back", bad)
		}
	}
	for _, good := range []string{`""`, `W/"x"`, `"a/b=c!#~"`} {
		etag = good
		if got, err := c.Catalog(ctx, Fetched{}); err != nil || got.ETag != good {
			t.Errorf("ETag %q: kept %q (%v)", good, got.ETag, err)
		}
	}
	if _, err := answering(t, http.StatusNotModified, text("")).Catalog(ctx, Fetched{}); err == nil {
		t.Error("a 304 to a fetch without an ETag was taken as a catalogue")
	}
}

// TestCatalogSameDocument: a document whose digest is the one fetched
// last is not checked again (it was, when it was stored): a catalogue this
// client would refuse is taken as Same; another digest checks it.
func TestCatalogSameDocument(t *testing.T) {
	doc := `{"services":[{"id":"a","name":"a","description":"d","bindable":true,"plans":[]}]}`
	c := answering(t, http.StatusOK, text(doc))
	ctx := context.Background()
	if _, err := c.Catalog(ctx, Fetched{}); err == nil || !strings.Contains(err.Error(), "at least one plan") {
		t.Fatalf("a service without plans: %v", err)
	}
	sum := sha256.Sum256([]byte(doc))
	cat, err := c.Catalog(ctx, Fetched{Digest: sum[:]})
	if err != nil || !cat.Same || cat.NotModified || cat.Len() != 0 || string(cat.Digest) != string(sum[:]) {
		t.Fatalf("the document fetched last: %+v, %v; want Same (not NotModified), no services, its digest", cat, err)
	}
	other := sha256.Sum256([]byte("{}"))
	if _, err := c.Catalog(ctx, Fetched{Digest: other[:]}); err == nil {
		t.Error("a document whose digest is not the last one's was not checked")
	}
}
