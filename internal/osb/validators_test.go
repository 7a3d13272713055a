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
// broker's ETag and Last-Modified, kept only when they could be sent back
// (a Last-Modified, when it is at least a second older than the answer);
// asked with them, a 304 says Same, and a 304 to a fetch that named none
// is an error.
func TestCatalogValidators(t *testing.T) {
	doc := `{"services":[{"id":"a","name":"a","description":"d","bindable":true,"plans":[{"id":"a-p","name":"p","description":"d"}]}]}`
	var asked http.Header
	etag := `"v1"`
	lastModified := "Mon, 02 Jan 2006 15:04:05 GMT"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.Header.Clone()
		w.Header().Set("ETag", etag)
		w.Header().Set("Last-Modified", lastModified)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
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
	if cat.Same || cat.NotModified || cat.Len() != 1 || string(cat.Digest) != string(sum[:]) {
		t.Fatalf("first fetch: Same %v, NotModified %v, %d services, digest %x (want %x)", cat.Same, cat.NotModified, cat.Len(), cat.Digest, sum)
	}
	want := Validators{ETag: `"v1"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT"}
	if cat.Validators != want {
		t.Fatalf("validators %+v, want %+v", cat.Validators, want)
	}
	if asked.Get("If-None-Match") != "" || asked.Get("If-Modified-Since") != "" {
		t.Errorf("a fetch without validators sent %q, %q", asked.Get("If-None-Match"), asked.Get("If-Modified-Since"))
	}
	again, err := c.Catalog(ctx, Fetched{Validators: cat.Validators, Digest: cat.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Same || !again.NotModified || again.Validators != want || string(again.Digest) != string(sum[:]) || asked.Get("If-Modified-Since") != want.LastModified {
		t.Errorf("asked with the validators: Same %v, NotModified %v, validators %+v, digest %x, If-Modified-Since %q", again.Same, again.NotModified, again.Validators, again.Digest, asked.Get("If-Modified-Since"))
	}
	for _, bad := range []string{"\"v\tw\"", `"` + strings.Repeat("x", 300) + `"`, "\"caf\xc3\xa9\""} {
		etag = bad
		got, err := c.Catalog(ctx, Fetched{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Validators.ETag != "" {
			t.Errorf("ETag %q kept; it cannot be sent back", bad)
		}
	}
	// Changed within a second of the answer's date (here after it, as a
	// broker whose clock is ahead says): it could change again within
	// that second, which If-Modified-Since would not tell.
	etag, lastModified = "", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if got, err := c.Catalog(ctx, Fetched{}); err != nil || got.Validators != (Validators{}) {
		t.Errorf("a Last-Modified not a second older than the answer: validators %+v (%v), want none", got.Validators, err)
	}
	if _, err := answering(t, http.StatusNotModified, text("")).Catalog(ctx, Fetched{}); err == nil {
		t.Error("a 304 to a fetch without validators was taken as a catalogue")
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
