// Package openapitest checks a test's HTTP exchanges with the catalog's REST
// API against openapi/openapi.yaml: every request and every response that
// passes through Transport is validated, and a mismatch fails the test.
package openapitest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/bindery-dev/bindery/openapi"
)

// Validator is an http.RoundTripper that validates each exchange with the
// API against the document. Make one with Transport.
type Validator struct {
	t       testing.TB
	base    http.RoundTripper
	router  routers.Router
	count   atomic.Int64
	skipped atomic.Int64
}

// Transport returns a RoundTripper that sends requests through base
// (http.DefaultTransport when nil) and validates each request and its
// response against the document, security excluded. A mismatch fails t
// with the method, path, status and the validation error:
//
//   - a response that does not match its operation (status, headers, body);
//   - a request the document refuses that the server nonetheless accepted
//     (answered below 400). A request the document refuses and the server
//     refuses too is what a test of bad input sends: only its (error)
//     response is checked.
//
// Requests for paths or methods the document does not have are passed
// through unchecked and counted by Skipped. Bodies are given back whole, so
// neither the server nor the caller sees a difference.
func Transport(t testing.TB, base http.RoundTripper) *Validator {
	t.Helper()
	if base == nil {
		base = http.DefaultTransport
	}
	router, err := openapi.NewRouter()
	if err != nil {
		t.Fatalf("openapitest: %v", err)
	}
	return &Validator{t: t, base: base, router: router}
}

// Count is how many exchanges were validated, so a test can tell that the
// validation really ran.
func (v *Validator) Count() int { return int(v.count.Load()) }

// Skipped is how many exchanges were not validated because the document has
// no such operation.
func (v *Validator) Skipped() int { return int(v.skipped.Load()) }

// RoundTrip sends req through the base transport and validates the
// exchange.
func (v *Validator) RoundTrip(req *http.Request) (*http.Response, error) {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		v.skipped.Add(1)
		return v.base.RoundTrip(req)
	}

	// Take the body once and give each reader its own copy: the request
	// sent on, and the one validated.
	var body []byte
	out := req
	if req.Body != nil && req.Body != http.NoBody {
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("openapitest: read request body: %w", err)
		}
		out = req.Clone(req.Context())
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.ContentLength = int64(len(body))
	}
	vreq := req.Clone(req.Context())
	vreq.Body, vreq.GetBody = http.NoBody, nil
	if body != nil {
		vreq.Body = io.NopCloser(bytes.NewReader(body))
		vreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		vreq.ContentLength = int64(len(body))
	}
	input := &openapi3filter.RequestValidationInput{
		Request:    vreq,
		PathParams: params,
		Route:      route,
		Options:    openapi.ValidationOptions(),
	}
	reqErr := openapi3filter.ValidateRequest(req.Context(), input)

	resp, err := v.base.RoundTrip(out)
	if err != nil {
		return resp, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	if err != nil {
		return resp, fmt.Errorf("openapitest: read response body: %w", err)
	}

	where := fmt.Sprintf("%s %s → %d", req.Method, req.URL.RequestURI(), resp.StatusCode)
	if reqErr != nil && resp.StatusCode < 400 {
		v.t.Errorf("openapitest: %s: the server accepted a request the document refuses: %v", where, reqErr)
	}
	respInput := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                openapi.ValidationOptions(),
	}
	respInput.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(req.Context(), respInput); err != nil {
		v.t.Errorf("openapitest: %s: the response does not match the document: %v", where, err)
	}
	v.count.Add(1)
	return resp, nil
}
