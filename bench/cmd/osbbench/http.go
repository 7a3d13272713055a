package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// server is an HTTP server on a loopback port.
type server struct {
	url  string
	srv  *http.Server
	done chan error
}

// serveLoopback serves h on a fresh 127.0.0.1 port.
func serveLoopback(h http.Handler) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &server{
		url:  "http://" + l.Addr().String(),
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(l) }()
	return s, nil
}

// close shuts the server down, waiting for requests in flight.
func (s *server) close(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down %s: %w", s.url, err)
	}
	if err := <-s.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", s.url, err)
	}
	return nil
}

// osbClient sends OSB requests to one broker with the headers every
// platform sends: basic auth and X-Broker-API-Version.
type osbClient struct {
	base     string
	username string
	password string
	http     *http.Client
}

// newTransport keeps enough idle keep-alive connections for every worker.
func newTransport(conns int) *http.Transport {
	return &http.Transport{
		MaxIdleConns:        2 * conns,
		MaxIdleConnsPerHost: 2 * conns,
		IdleConnTimeout:     time.Minute,
	}
}

// do sends a request and fails unless the broker answers with status
// want. It reads and closes the body, so the connection is reused, and
// returns its length.
func (c *osbClient) do(ctx context.Context, method, path string, body any, want int) (int64, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.SetBasicAuth(c.username, c.password)
	req.Header.Set("X-Broker-API-Version", "2.17")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, bytes.TrimSpace(msg))
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return n, nil
}

// randomHex returns n random bytes in hex: ids, names and credentials.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
