package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/cli"
	"github.com/bindery-dev/bindery/cli/cmd/instance"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/syncbuf"
)

// BenchmarkCLIHelp is the wall time of `bindery --help`, a whole process
// each time (the target is under 150 ms).
func BenchmarkCLIHelp(b *testing.B) {
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "--help")
		cmd.Env = []string{runMainEnv + "=1", "HOME=" + b.TempDir()}
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "provision") {
			b.Fatalf("bindery --help: %v\n%s", err, out)
		}
	}
}

// BenchmarkCLIInstances1000 is the wall time of `bindery instances`, a
// whole process each time, against `bindery serve catalog` holding 1,000
// instances in the namespace (the target is under 150 ms). It runs the
// binary as `make build` makes it and reports, as medians over 15 runs
// each, where the time goes:
//
//   - startup-ms: the process alone (`bindery instances --help`: exec,
//     package initialisation, the command tree);
//   - request-ms: GET of the page on a new connection, server included,
//     as the CLI does it once per process;
//   - server-ms: the same on a kept-alive connection (the server's part);
//   - decode-ms: decoding that page as the CLI does for a table;
//   - inprocess-ms: the whole command in this process (cli.Main), which is
//     the wall time less startup.
func BenchmarkCLIInstances1000(b *testing.B) {
	dbURL, key := pgtest.New(b), keyring.Generate()
	env := brokerEnv(dbURL, key)
	tokCmd := exec.Command(os.Args[0], "token", "create", "--role", "admin")
	tokCmd.Env = append([]string{runMainEnv + "=1"}, env...)
	out, err := tokCmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	token := strings.TrimSpace(string(out))
	brokerURL := servingB(b, env, "serve", "broker")
	catalogURL := servingB(b, env, "serve", "catalog")
	cfg := []string{runMainEnv + "=1", "HOME=" + b.TempDir(), "BINDERY_URL=" + catalogURL, "BINDERY_TOKEN=" + token}
	run := func(args ...string) string {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = cfg
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("bindery %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("brokers", "register", "bindery", brokerURL, "-u", "osb-user", "-p", "osb-password-1234")
	// 1,000 instances through the REST API, eight at a time; the engine
	// is not running, so they stay as recorded.
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	sem := make(chan struct{}, 8)
	for i := range 1000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cmd := exec.Command(os.Args[0], "-n", "bench", "provision", fmt.Sprintf("db-%04d", i), "-c", "postgresql", "-p", "small")
			cmd.Env = cfg
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}

	// The binary people run, not this test binary.
	bin := buildBindery(b)
	product := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + b.TempDir(), "BINDERY_URL=" + catalogURL, "BINDERY_TOKEN=" + token}
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("bindery %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	const runs = 15
	startup := medianMS(runs, func() { product("instances", "--help") })
	page := catalogURL + "/api/v1/instances?namespace=bench&limit=1000"
	get := func(client *http.Client) []byte {
		req, _ := http.NewRequest("GET", page, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/json")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", page, res.StatusCode, err)
		}
		return body
	}
	request := medianMS(runs, func() {
		// A new client per request: a new connection, as each process has.
		c := &http.Client{Transport: &http.Transport{}}
		get(c)
		c.CloseIdleConnections()
	})
	kept := &http.Client{}
	body := get(kept)
	server := medianMS(runs, func() { get(kept) })
	decode := medianMS(runs, func() {
		// The fields the table shows, as the CLI decodes them.
		var page struct {
			Items []struct {
				Namespace, Name string
				Spec            struct {
					Class string `json:"clusterServiceClassExternalName"`
					Plan  string `json:"clusterServicePlanExternalName"`
				}
				instance.State
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			b.Fatal(err)
		}
	})
	b.Setenv("BINDERY_URL", catalogURL)
	b.Setenv("BINDERY_TOKEN", token)
	b.Setenv("XDG_CONFIG_HOME", b.TempDir())
	inprocess := medianMS(runs, func() {
		var stdout, stderr bytes.Buffer
		if code := cli.Main(b.Context(), "bindery", []string{"-n", "bench", "instances"}, cli.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr}, cli.Server{}); code != 0 {
			b.Fatalf("instances in process: exit %d: %s", code, stderr.String())
		}
	})
	b.Logf("page %d kB; medians: startup %.1f ms, request %.1f ms (server %.1f ms), decode %.1f ms, whole command in process %.1f ms",
		len(body)>>10, startup, request, server, decode, inprocess)

	b.ResetTimer()
	for b.Loop() {
		out := product("-n", "bench", "instances")
		if n := strings.Count(out, "\n"); n != 1001 {
			b.Fatalf("instances printed %d lines, want 1001", n)
		}
	}
	b.StopTimer()
	b.ReportMetric(startup, "startup-ms")
	b.ReportMetric(request, "request-ms")
	b.ReportMetric(server, "server-ms")
	b.ReportMetric(decode, "decode-ms")
	b.ReportMetric(inprocess, "inprocess-ms")
}

// buildBindery builds ./cmd/bindery as `make build` does, into a temporary
// directory, and returns its path.
func buildBindery(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "bindery")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// medianMS runs f n times and returns the median duration in milliseconds.
func medianMS(n int, f func()) float64 {
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		f()
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	return float64(ds[n/2].Microseconds()) / 1000
}

// servingB starts `bindery serve COMPONENT` for a benchmark and returns
// its base URL once /healthz answers.
func servingB(b *testing.B, env []string, args ...string) string {
	b.Helper()
	url, _ := servingCmd(b, env, args...)
	return url
}

// servingCmd is servingB that also returns the process, for a benchmark
// that kills it.
func servingCmd(b *testing.B, env []string, args ...string) (string, *exec.Cmd) {
	b.Helper()
	msg := map[string]string{"broker": "serving the OSB API", "catalog": "serving the REST API", "controller": "serving health and metrics"}[args[1]]
	args = append(args, "--listen", "127.0.0.1:0")
	if args[1] != "broker" {
		args = append(args, "--broker-allow-loopback")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{runMainEnv + "=1", "HOME=" + b.TempDir()}, env...)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	re := regexp.MustCompile(`msg="` + regexp.QuoteMeta(msg) + `".* addr=(\S+)`)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m := re.FindStringSubmatch(stderr.String())
		if m == nil {
			continue
		}
		if res, err := http.Get("http://" + m[1] + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return "http://" + m[1], cmd
			}
		}
	}
	b.Fatalf("bindery %s did not serve within 60s:\n%s", args[1], stderr.String())
	return "", nil
}
