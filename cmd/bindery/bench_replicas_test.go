package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkEngineReplicas runs `bindery serve controller` as one process
// and as three on one database, each time working 1,000 instances and
// 1,000 bindings (created through `bindery serve catalog`'s REST API from
// 16 clients) against a broker that answers at once, and reports the
// objects made Ready per second and the broker calls made more than once
// for the same object (provisions per instance id, binds per binding id).
// "3-kill" SIGKILLs one of the three engines once a third of the bindings
// are Ready: its claims end with its connections and the other two finish.
//
//	go test ./cmd/bindery -run '^$' -bench EngineReplicas -benchtime 1x
func BenchmarkEngineReplicas(b *testing.B) {
	for _, tc := range []struct {
		name    string
		engines int
		kill    bool
	}{{"1", 1, false}, {"3", 3, false}, {"3-kill", 3, true}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				replicaRun(b, tc.engines, tc.kill)
			}
		})
	}
}

func replicaRun(b *testing.B, engines int, kill bool) {
	const n = 1000
	dbURL, key := pgtest.New(b), keyring.Generate()
	env := []string{"DATABASE_URL=" + dbURL, "BINDERY_ENCRYPTION_KEY=" + key}
	tok := exec.Command(os.Args[0], "token", "create", "--role", "admin")
	tok.Env = append([]string{runMainEnv + "=1", "HOME=" + b.TempDir()}, env...)
	out, err := tok.Output()
	if err != nil {
		b.Fatalf("token create: %v", err)
	}
	c := restClient{b: b, token: strings.TrimSpace(string(out)), http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	c.base = servingB(b, env, "serve", "catalog") + "/api/v1"

	fake := osbtest.New(b, osbtest.WithRetryAfter(0))
	c.post("/brokers", map[string]any{"name": "fake", "url": fake.URL()})

	var procs []*exec.Cmd
	for range engines {
		_, cmd := servingCmd(b, env, "serve", "controller")
		procs = append(procs, cmd)
	}

	start := time.Now()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				c.post("/instances", map[string]any{"name": fmt.Sprintf("db-%d", i), "namespace": "bench",
					"spec": map[string]any{"clusterServiceClassExternalName": osbtest.DefaultService, "clusterServicePlanExternalName": osbtest.PlanSync}})
				c.post("/bindings", map[string]any{"name": fmt.Sprintf("app-%d", i), "namespace": "bench",
					"spec": map[string]any{"instanceRef": map[string]any{"name": fmt.Sprintf("db-%d", i)}}})
			}
		}()
	}
	wg.Wait()
	killed := !kill
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		ready := c.readyBindings()
		if ready == n {
			break
		}
		if !killed && ready >= n/3 {
			_ = procs[0].Process.Kill()
			killed = true
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d bindings Ready after 5 minutes", ready, n)
		}
	}
	took := time.Since(start)

	calls := map[string]int{}
	for _, r := range fake.Requests() {
		if r.Verb == osbtest.VerbProvision || r.Verb == osbtest.VerbBind {
			calls[string(r.Verb)+" "+r.Path]++
		}
	}
	twice := 0
	for _, k := range calls {
		twice += k - 1
	}
	if len(calls) != 2*n {
		b.Errorf("%d objects reached the broker, want %d", len(calls), 2*n)
	}
	b.ReportMetric(float64(2*n)/took.Seconds(), "objects/s")
	b.ReportMetric(float64(twice), "calls-made-twice")
}

// restClient is a small client of the REST API for benchmarks.
type restClient struct {
	b     *testing.B
	base  string
	token string
	http  *http.Client
}

func (c restClient) do(method, path string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		buf, _ := json.Marshal(body)
		rd = bytes.NewReader(buf)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		c.b.Error(err)
		return 0, nil
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

func (c restClient) post(path string, body any) {
	if status, out := c.do("POST", path, body); status != http.StatusCreated {
		c.b.Fatalf("POST %s: %d %s", path, status, out)
	}
}

// readyBindings counts the bindings whose Ready condition is True, a page
// at a time.
func (c restClient) readyBindings() int {
	ready, cont := 0, ""
	for {
		status, out := c.do("GET", "/bindings?limit=500&continue="+url.QueryEscape(cont), nil)
		if status != http.StatusOK {
			c.b.Fatalf("list bindings: %d %s", status, out)
		}
		var page struct {
			Items []struct {
				Status struct {
					Conditions []struct{ Type, Status string }
				}
			}
			Continue string
		}
		if err := json.Unmarshal(out, &page); err != nil {
			c.b.Fatal(err)
		}
		for _, it := range page.Items {
			for _, cond := range it.Status.Conditions {
				if cond.Type == "Ready" && cond.Status == "True" {
					ready++
				}
			}
		}
		if page.Continue == "" {
			return ready
		}
		cont = page.Continue
	}
}
