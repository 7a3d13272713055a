package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

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
// instances in the namespace (the target is under 150 ms).
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
	// What the server takes, for comparison: the same page over HTTP.
	req, _ := http.NewRequest("GET", catalogURL+"/api/v1/instances?namespace=bench&limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	for range 5 {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	serverMS := float64(time.Since(start).Milliseconds()) / 5
	b.ResetTimer()
	for b.Loop() {
		out := run("-n", "bench", "instances")
		if n := strings.Count(out, "\n"); n != 1001 {
			b.Fatalf("instances printed %d lines, want 1001", n)
		}
	}
	b.ReportMetric(serverMS, "server-ms/list")
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
