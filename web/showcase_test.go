package web_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/bindery-dev/bindery/internal/osbtest"
)

// iconPNG is a size×size PNG: a disc of colour c on a transparent square.
func iconPNG(t testing.TB, size int, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, size, size))
	r := size / 2
	for y := range size {
		for x := range size {
			if dx, dy := x-r, y-r; dx*dx+dy*dy <= (r-2)*(r-2) {
				img.Set(x, y, c)
			}
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// iconSite serves icons as a broker's web site would, and counts the
// requests it gets (the browser must never be one of them).
func iconSite(t testing.TB) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	files := map[string][]byte{
		"/cache.png": iconPNG(t, 64, color.RGBA{R: 214, G: 69, B: 65, A: 255}),
		"/queue.svg": []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><script>alert(1)</script>` +
			`<rect x="4" y="14" width="56" height="36" rx="8" fill="#7048e8"/><path d="M14 32h36M38 22l12 10-12 10" stroke="#fff" stroke-width="5" fill="none"/></svg>`),
	}
	hits := &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"1"`)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

// showcaseCatalog is a broker's catalogue as a marketplace shows it at
// its best: display names, providers, long descriptions, links, plans
// with bullets and prices, and icons of every kind (fetched PNG and SVG,
// data: URIs, one that cannot be fetched, none).
func showcaseCatalog(t testing.TB, site string) []osbtest.Service {
	t.Helper()
	storage := `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="14" fill="#0a7d5a"/>` +
		`<ellipse cx="32" cy="20" rx="18" ry="7" fill="#fff"/><path d="M14 20v24c0 4 8 7 18 7s18-3 18-7V20" fill="none" stroke="#fff" stroke-width="4"/></svg>`
	metrics := iconPNG(t, 48, color.RGBA{R: 230, G: 150, B: 20, A: 255})
	service := func(id, name, display, provider, desc, long, image string, tags []string, plans ...osbtest.Plan) osbtest.Service {
		md := map[string]any{"displayName": display, "providerDisplayName": provider, "longDescription": long,
			"documentationUrl": "https://docs.example.com/" + name, "supportUrl": "https://support.example.com/" + name}
		if image != "" {
			md["imageUrl"] = image
		}
		return osbtest.Service{ID: id, Name: name, Description: desc, Bindable: true, Tags: tags, Metadata: md, Plans: plans}
	}
	plan := func(id, name, display, desc string, free bool, usd float64, bullets ...string) osbtest.Plan {
		md := map[string]any{"displayName": display, "bullets": toAny(bullets)}
		if !free {
			md["costs"] = []any{map[string]any{"amount": map[string]any{"usd": usd}, "unit": "MONTHLY"}}
		}
		return osbtest.Plan{ID: id, Name: name, Description: desc, Free: &free, Metadata: md, MaintenanceInfo: &osbtest.MaintenanceInfo{Version: "2.4.1"}}
	}
	return []osbtest.Service{
		service("cache-id", "cache", "Cache", "Acme Data", "An in-memory key-value cache with persistence and replicas.",
			"Keys expire on their own; values up to 512 MB.\nReplicas in other zones take over within seconds.", site+"/cache.png",
			[]string{"cache", "key-value"},
			plan("cache-shared", "shared", "Shared", "A cache on shared nodes.", true, 0, "250 MB memory", "Shared CPU"),
			plan("cache-dedicated", "dedicated", "Dedicated", "A cache on its own node.", false, 49, "4 GB memory", "2 vCPU", "Daily backups"),
			plan("cache-ha", "ha", "Highly available", "Two nodes in two zones.", false, 199, "16 GB memory", "Automatic failover")),
		service("queue-id", "queue", "Message queue", "Acme Data", "Durable queues and topics for services that talk to each other.", "",
			site+"/queue.svg", []string{"messaging"},
			plan("queue-dev", "dev", "Development", "For trying things out.", true, 0, "1,000 messages a day"),
			plan("queue-prod", "prod", "Production", "Replicated queues.", false, 99, "Unlimited messages")),
		service("storage-id", "object-storage", "Object storage", "Bucket Co.", "Buckets of files behind an S3-compatible API.", "",
			"data:image/svg+xml;base64,"+base64.StdEncoding.EncodeToString([]byte(storage)), []string{"storage", "s3"},
			plan("storage-std", "standard", "Standard", "Pay for what you keep.", false, 5, "100 GB included")),
		service("metrics-id", "metrics", "Metrics", "Observe Inc.", "Time series, dashboards and alerts for your applications.", "",
			"data:image/png;base64,"+base64.StdEncoding.EncodeToString(metrics), []string{"monitoring"},
			plan("metrics-free", "free", "Free", "Ten thousand series.", true, 0)),
		service("search-id", "search", "Full-text search", "Find Ltd.", "Indexes and searches documents in many languages.", "",
			site+"/missing.png", []string{"search"},
			plan("search-small", "small", "Small", "One node.", false, 29, "10 GB index")),
		service("mail-id", "mail", "", "", "Sends transactional e-mail.", "", "", nil,
			plan("mail-free", "free", "", "Up to 100 e-mails a day.", true, 0)),
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
