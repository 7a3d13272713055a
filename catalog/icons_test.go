package catalog_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osb"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// pngOf is a w×h PNG.
func pngOf(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.RGBA{R: 200, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// iconSite serves icons by path, with ETags, and counts what it is asked.
type iconSite struct {
	*httptest.Server
	mu       sync.Mutex
	files    map[string][]byte
	gets     map[string]int
	notModif int
}

func newIconSite(t *testing.T, addr string, files map[string][]byte) *iconSite {
	s := &iconSite{files: files, gets: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.gets[r.URL.Path]++
		body, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		etag := `"v-` + r.URL.Path + `"`
		if r.Header.Get("If-None-Match") == etag {
			s.notModif++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		// What it claims to be is not what it is taken for.
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(body)
	}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *iconSite) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[path]
}

// iconCatalog is a catalogue of one service per icon URL.
func iconCatalog(urls ...string) []osbtest.Service {
	services := osbtest.GenerateCatalog(len(urls), 1)
	for i, u := range urls {
		services[i].Metadata["imageUrl"] = u
	}
	return services
}

// classIcon reads the icon of the service whose catalogue entry is i.
func classIcon(t *testing.T, s *catalog.Store, services []osbtest.Service, i int) (*catalog.Icon, error) {
	t.Helper()
	class, err := s.GetClass(context.Background(), services[i].ID)
	if err != nil {
		t.Fatal(err)
	}
	return s.ClassIcon(context.Background(), class)
}

// TestServiceIcons: at a relist, icons named by http URLs are fetched
// and data: URIs decoded; each is taken for what its bytes are (PNG,
// SVG made safe), and refused when it is none of the formats, too large
// or of too many pixels. A second relist asks for nothing; an icon due
// again is asked for with its ETag and kept on 304. Icons no service of
// the broker names any more are pruned at its next relist.
func TestServiceIcons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	small := pngOf(t, 32, 32)
	site := newIconSite(t, "127.0.0.1:0", map[string][]byte{
		"/ok.png":    small,
		"/evil.svg":  []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script><circle r="4"/></svg>`),
		"/page.html": []byte(`<!doctype html><html><body>not an icon</body></html>`),
		"/huge.png":  pngOf(t, 4000, 1),
		"/big.png":   bytes.Repeat([]byte{0}, 200<<10),
	})
	services := iconCatalog(site.URL+"/ok.png", "data:image/png;base64,"+base64.StdEncoding.EncodeToString(small),
		site.URL+"/evil.svg", site.URL+"/page.html", site.URL+"/huge.png", site.URL+"/big.png", site.URL+"/missing.png",
		"ftp://example.com/x.png")
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(services))
	b := register(t, s, "icons", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		ctype string
		body  []byte
	}{{"image/png", small}, {"image/png", small}, {"image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><circle r="4"></circle></svg>`)}} {
		ic, err := classIcon(t, s, services, i)
		if err != nil {
			t.Fatalf("icon %d: %v", i, err)
		}
		if ic.ContentType != want.ctype || !bytes.Equal(ic.Body, want.body) || ic.ETag == "" {
			t.Errorf("icon %d: %s %q", i, ic.ContentType, ic.Body)
		}
	}
	for i := 3; i < len(services); i++ {
		if ic, err := classIcon(t, s, services, i); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("icon %d (%s) kept: %v %v", i, services[i].Metadata["imageUrl"], ic, err)
		}
	}
	// Not asked for again at the next relist, the failures neither.
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/ok.png", "/evil.svg", "/page.html", "/missing.png"} {
		if n := site.count(p); n != 1 {
			t.Errorf("%s asked for %d times in two relists", p, n)
		}
	}
	// Due again: asked for with its ETag, kept on 304.
	if _, err := pool.Exec(ctx, `UPDATE catalog.service_icons SET next_fetch_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if site.count("/ok.png") != 2 || site.notModif != 2 { // ok.png and evil.svg
		t.Errorf("due icons: ok.png asked %d times, %d answered 304", site.count("/ok.png"), site.notModif)
	}
	if ic, err := classIcon(t, s, services, 0); err != nil || !bytes.Equal(ic.Body, small) {
		t.Fatalf("after a 304: %v", err)
	}
	// The broker drops the first icon; its next relist prunes it.
	delete(services[0].Metadata, "imageUrl")
	fake.SetCatalog(services)
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM catalog.service_icons WHERE body IS NOT NULL`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 2 { // the data: URI's (the same PNG, another URL) and the SVG
		t.Errorf("%d icons left after one was dropped", left)
	}
}

// TestServiceIconsEgress: icons are fetched through the broker egress
// policy: an icon on a denied address is never asked for.
func TestServiceIconsEgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The broker is reached (loopback allowed), the icon site is not: it
	// is on another loopback address, which the policy denies.
	site := newIconSite(t, "127.0.0.2:0", map[string][]byte{"/ok.png": pngOf(t, 8, 8)})
	deny := []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	pool := pgtest.Pool(t)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	keys, _ := keyring.Parse(keyring.Generate())
	s := catalog.NewStore(pool, keys, nil, catalog.WithBrokerEgress(&osb.Egress{AllowLoopback: true, Deny: deny}))
	services := iconCatalog(site.URL + "/ok.png")
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(services))
	b := register(t, s, "egress", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := classIcon(t, s, services, 0); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("an icon behind the egress policy: %v", err)
	}
	if n := site.count("/ok.png"); n != 0 {
		t.Fatalf("the denied site was asked %d times", n)
	}
	var problem string
	if err := pool.QueryRow(ctx, `SELECT problem FROM catalog.service_icons`).Scan(&problem); err != nil || !strings.Contains(problem, "egress policy") {
		t.Fatalf("the failure recorded: %q (%v)", problem, err)
	}
}
