// Package servetest reads what Bindery's servers serve beside their APIs,
// for tests.
package servetest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/eventually"
)

// Scrape reads /metrics at addr (HOST:PORT) as Prometheus would, with
// token as its bearer token unless empty, trying for up to 10 s while the
// server starts.
func Scrape(t testing.TB, addr, token string) string {
	t.Helper()
	var body string
	eventually.Succeeds(t, 10*time.Second, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /metrics: %d %v", resp.StatusCode, err)
		}
		body = string(b)
		return nil
	})
	return body
}

// Lines is the lines of s that hold sub.
func Lines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
