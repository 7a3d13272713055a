package serve_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/internal/syncbuf"
)

// TestRequestLogKeepsSecretsOut sends what a client's secrets ride in — a
// bearer token, a password in the body, a token in the query string — and
// checks that the request is logged with its method, path and status but
// none of them.
func TestRequestLogKeepsSecretsOut(t *testing.T) {
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := serve.NewEcho(log, prometheus.NewRegistry())
	e.POST("/api/v1/brokers", func(c echo.Context) error {
		if _, err := io.ReadAll(c.Request().Body); err != nil {
			return err
		}
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "spec.url: required")
	})
	srv := httptest.NewServer(e)
	defer srv.Close()

	const (
		token    = "tok-3f9a1c0e5b7d"
		password = "pw-8e2b6d4a1c9f"
		query    = "qs-5c1e9b3a7d2f"
	)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/brokers?access_token="+query,
		strings.NewReader(`{"name":"b","auth":{"basic":{"username":"u","password":"`+password+`"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422", resp.StatusCode)
	}

	out := logs.String()
	for _, want := range []string{"method=POST", "path=/api/v1/brokers ", "status=422", "latency="} {
		if !strings.Contains(out, want) {
			t.Errorf("request log lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{token, password, query, "Bearer", "access_token"} {
		if strings.Contains(out, secret) {
			t.Errorf("request log contains %q:\n%s", secret, out)
		}
	}
}

// TestRequestLogProbesAtDebug checks that the probes, which kubelet and
// scrapers call every few seconds, stay out of an info-level log.
func TestRequestLogProbesAtDebug(t *testing.T) {
	logs := &syncbuf.Buffer{}
	e := serve.NewEcho(slog.New(slog.NewTextHandler(logs, nil)), prometheus.NewRegistry())
	srv := httptest.NewServer(e)
	defer srv.Close()
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/nothing-here"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	out := logs.String()
	if strings.Contains(out, "/healthz") || strings.Contains(out, "/readyz") || strings.Contains(out, "/metrics") {
		t.Errorf("probes logged at info:\n%s", out)
	}
	if !strings.Contains(out, "path=/nothing-here status=404") {
		t.Errorf("other requests not logged at info:\n%s", out)
	}
}

// TestRunCancelsLingeringRequests: at a shutdown, a request that waits on
// something slow (a broker that does not answer) is cancelled after a short
// grace instead of holding the process for the whole shutdown timeout, and
// still answers.
func TestRunCancelsLingeringRequests(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-r.Context().Done():
			w.WriteHeader(http.StatusServiceUnavailable)
		case <-time.After(time.Minute):
			w.WriteHeader(http.StatusOK)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve.Run(ctx, l, h, slog.New(slog.DiscardHandler)) }()
	answered := make(chan int, 1)
	go func() {
		res, err := http.Get("http://" + l.Addr().String() + "/slow")
		if err != nil {
			answered <- 0
			return
		}
		res.Body.Close()
		answered <- res.StatusCode
	}()
	<-entered
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the shutdown waited for the lingering request")
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Errorf("the request was cancelled after %s, before its grace", took)
	}
	if code := <-answered; code != http.StatusServiceUnavailable {
		t.Errorf("the cancelled request answered %d, want the handler's 503", code)
	}
}

// TestJSONAsGiven: a JSON answer keeps &, < and > as they are (a
// credential's URL reads as the broker gave it), and says nosniff.
func TestJSONAsGiven(t *testing.T) {
	e := serve.NewEcho(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	e.GET("/credentials", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"jdbcUrl": "jdbc:postgresql://db/x?user=a&password=<b>"})
	})
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/credentials", nil))
	if got, want := strings.TrimSpace(rec.Body.String()), `{"jdbcUrl":"jdbc:postgresql://db/x?user=a&password=<b>"}`; got != want {
		t.Errorf("body %s, want %s", got, want)
	}
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q, want nosniff", got)
	}
}

// TestRunClosesIdleConnections: a connection kept open after its request,
// with nothing more sent, is closed after the idle timeout, so that
// whoever can reach a port cannot hold file descriptors and goroutines of
// the process for good by opening connections and leaving them idle.
func TestRunClosesIdleConnections(t *testing.T) {
	defer serve.SetIdleTimeout(300 * time.Millisecond)()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve.Run(ctx, l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }), slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// The answer, then the end of the connection: the server closes it.
	rest, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the idle connection was kept open for 5 s (read %q): %v", rest, err)
	}
	if !strings.Contains(string(rest), "200 OK") {
		t.Fatalf("no answer: %q", rest)
	}
}

// TestPanicAnswered: a panic while serving a request is answered 500,
// logged with the request and its stack, and the request log sees the
// 500. net/http used to cut the connection, leaving the client no answer
// it could act on.
func TestPanicAnswered(t *testing.T) {
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := serve.NewEcho(log, prometheus.NewRegistry())
	e.GET("/api/v1/boom", func(echo.Context) error { panic("a nil map, say") })
	srv := httptest.NewServer(e)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/boom")
	if err != nil {
		t.Fatalf("a panicking handler: %v, want an answer", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("a panicking handler: status %d, want 500", resp.StatusCode)
	}
	out := logs.String()
	for _, want := range []string{"a nil map, say", "stack=", "status=500"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}
