package apiserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/kubetest"
)

// tableAccept is what `kubectl get` asks for: a Table, by JSON.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// pager reads pages of 500 rows as kubectl does (Accept: a Table) from
// one server's URL with a token, following continue, and starting over
// after the last page. times are how long each read took until its body
// was read.
type pager struct {
	client           *http.Client
	base, path, cont string
	token            string
	times            []time.Duration
}

func (p *pager) read(tb testing.TB) {
	tb.Helper()
	q := url.Values{"limit": {"500"}}
	if p.cont != "" {
		q.Set("continue", p.cont)
	}
	req, err := http.NewRequest(http.MethodGet, p.base+p.path+"?"+q.Encode(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Accept", tableAccept)
	req.Header.Set("Authorization", "Bearer "+p.token)
	start := time.Now()
	resp, err := p.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	p.times = append(p.times, time.Since(start))
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %s %v: %.200s", p.path, resp.Status, err, body)
	}
	var t struct {
		Metadata struct{ Continue string }
		Rows     []json.RawMessage
	}
	if err := json.Unmarshal(body, &t); err != nil || len(t.Rows) == 0 {
		tb.Fatalf("GET %s: not a table of rows (%v): %.200s", p.path, err, body)
	}
	p.cont = t.Metadata.Continue
}

// readInTurns has each pager read every page once, in turn, rounds
// times: a slower spell of the machine falls on all of them alike, while
// each reads its pages one after the other, as kubectl does (what one
// server leaves to collect does not fall on the other's page after it).
func readInTurns(tb testing.TB, rounds int, pagers ...*pager) {
	for range rounds {
		for _, p := range pagers {
			p.read(tb)
			for p.cont != "" {
				p.read(tb)
			}
		}
	}
}

// httpClientFor trusts caData only.
func httpClientFor(tb testing.TB, caData []byte) *http.Client {
	tb.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caData) {
		tb.Fatal("no certificate in the CA data")
	}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
}

func p50(ds []time.Duration) float64 { return float64(median(ds).Microseconds()) / 1000 }

// kubectlTrace is one `kubectl get resource -A` at -v=6: the sum of the
// times its requests took (from sending to the response's headers), and
// of the waits its client-side rate limiter (5 requests a second, a burst
// of 10: client-go's defaults, which kubectl keeps for everything but
// discovery) imposed before them, with the number of requests.
type kubectlTrace struct {
	wall, requests, throttled time.Duration
	n                         int
}

var (
	responseMS = regexp.MustCompile(`"Response".* milliseconds=(\d+)`)
	waitedFor  = regexp.MustCompile(`Waited before sending request.* delay="([^"]+)"|Waited for ([0-9.]+[mµn]?s) due to client-side throttling`)
)

func traceKubectl(tb testing.TB, c *kubetest.Cluster, resource string) kubectlTrace {
	tb.Helper()
	cmd := c.KubectlCommand(context.Background(), kubetest.Admin, "get", resource, "-A", "-v=6")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		tb.Fatalf("kubectl get %s -v=6: %v: %s", resource, err, stderr.String())
	}
	tr := kubectlTrace{wall: time.Since(start)}
	for _, m := range responseMS.FindAllSubmatch(stderr.Bytes(), -1) {
		ms, _ := strconv.Atoi(string(m[1]))
		tr.requests += time.Duration(ms) * time.Millisecond
		tr.n++
	}
	for _, m := range waitedFor.FindAllSubmatch(stderr.Bytes(), -1) {
		d, err := time.ParseDuration(string(m[1]) + string(m[2]))
		if err == nil {
			tr.throttled += d
		}
	}
	if tr.n == 0 {
		tb.Fatalf("kubectl -v=6 logged no response: %.2000s", stderr.String())
	}
	return tr
}

// profileDir is where the benchmark writes the server's profiles when
// BINDERY_BENCH_PROFILE names a directory.
func profileDir() string { return os.Getenv("BINDERY_BENCH_PROFILE") }

// saveProfile GETs path (a /debug/pprof endpoint) from the server and
// writes it to name in profileDir.
func saveProfile(tb testing.TB, client *http.Client, base, token, path, name string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %s %v: %.200s", path, resp.Status, err, body)
	}
	if err := os.WriteFile(filepath.Join(profileDir(), name), body, 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("profile %s written", name)
}

// rssParts is the anonymous and file-backed parts of process pid's
// resident set (proc(5): RssAnon, RssFile), as /proc status says them.
func rssParts(tb testing.TB, pid int) string {
	tb.Helper()
	return "anonymous " + strconv.FormatFloat(memoryMB(tb, pid, "RssAnon"), 'f', 0, 64) +
		" MB, file-backed " + strconv.FormatFloat(memoryMB(tb, pid, "RssFile"), 'f', 0, 64) + " MB"
}
