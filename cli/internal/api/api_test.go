package api

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
)

// TestTransient: what a wait rides out is what may pass if sent again —
// a server failing over (500, 502, 503, 504), too many requests (429), a
// connection refused, reset or cut off — and nothing else. A 501 or 505,
// an untrusted certificate or a bad URL used to be retried until the
// wait's timeout, or for ever without one.
func TestTransient(t *testing.T) {
	t.Parallel()
	wrapped := func(err error) error {
		return &url.Error{Op: "Get", URL: "https://bindery.example/api/v1/instances/x", Err: err}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"500", &Error{Status: 500}, true},
		{"502", &Error{Status: 502}, true},
		{"503", &Error{Status: 503}, true},
		{"504", &Error{Status: 504}, true},
		{"429", &Error{Status: 429}, true},
		{"501", &Error{Status: 501}, false},
		{"505", &Error{Status: 505}, false},
		{"404", &Error{Status: 404}, false},
		{"connection refused", wrapped(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"connection reset", wrapped(fmt.Errorf("read: %w", syscall.ECONNRESET)), true},
		{"answer cut off", wrapped(io.ErrUnexpectedEOF), true},
		{"connection closed", wrapped(io.EOF), true},
		{"untrusted certificate", wrapped(fmt.Errorf("tls: failed to verify certificate: %w", x509.UnknownAuthorityError{})), false},
		{"unsupported scheme", wrapped(errors.New(`unsupported protocol scheme "htp"`)), false},
	} {
		if got, _ := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient = %v, want %v", tc.name, got, tc.want)
		}
	}
}
