// Package api is the CLI's client of Bindery's REST API (openapi/openapi.yaml).
// Objects are kept as decoded JSON, numbers as their text (json.Number), so
// that -o json|yaml prints every field the server sent as it sent it, and
// tables read the few they show through Object.Str.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/bindery-dev/bindery/cli/internal/output"
	"github.com/bindery-dev/bindery/internal/backoff"
)

// Object is one object of the API, as decoded JSON.
type Object map[string]any

// Get walks path through nested objects and returns what is there.
func (o Object) Get(path ...string) any {
	var v any = map[string]any(o)
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// Str is Get as a string ("" when absent or not a string).
func (o Object) Str(path ...string) string {
	s, _ := o.Get(path...).(string)
	return s
}

// Int is Get as an integer (0 when absent or not a number); a number of
// the API is a json.Number (Client.Do).
func (o Object) Int(path ...string) int64 {
	switch n := o.Get(path...).(type) {
	case json.Number:
		i, _ := n.Int64()
		return i
	case float64:
		return int64(n)
	}
	return 0
}

// Bool is Get as a bool.
func (o Object) Bool(path ...string) bool {
	b, _ := o.Get(path...).(bool)
	return b
}

// Condition returns the condition of this type in status.conditions.
func (o Object) Condition(typ string) Object {
	list, _ := o.Get("status", "conditions").([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// Error is an answer of the API other than 2xx; main turns its status into
// the exit code.
type Error struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
	// Hint is what the CLI adds about its own flags (not the server's).
	Hint   string `json:"-"`
	Field  string `json:"field"`
	Fields []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"fields"`
	// RetryAfter is how long the server asked to wait before trying
	// again (its Retry-After header, with a 503 or a 429); 0 when it did
	// not say.
	RetryAfter time.Duration `json:"-"`
}

// Error is the server's message for people (its field paths are for
// API clients, and stay out), made safe for a terminal, with what to do
// about a token refused or not allowed.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Message != "" {
		b.WriteString(output.Safe(e.Message))
	} else {
		fmt.Fprintf(&b, "the server answered %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Hint != "" {
		b.WriteString(" " + e.Hint)
	}
	switch e.Status {
	case http.StatusUnauthorized:
		b.WriteString(" Log in again with a valid token (`bindery login URL`), or set BINDERY_TOKEN.")
	case http.StatusForbidden:
		if e.Code == "quota_exceeded" {
			break // the sentence is the whole story: a quota, not the token
		}
		b.WriteString(" Ask an admin for a token with that role or namespace (`bindery token create`).")
	}
	return b.String()
}

// HintNotFound adds the CLI's hint to err when it is a 404 of the API, and
// returns err.
func HintNotFound(err error, hint string) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		e.Hint = hint
	}
	return err
}

// NotFound tells whether err is a 404 of the API.
func NotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// Transient tells whether the same request may succeed if sent again: the
// connection was refused, reset, timed out or cut off, or the server
// answered 500, 502, 503 or 504 (a database failing over, a restart) or
// 429 (too many requests). after is the wait the server asked for, when it
// did. Any other answer or error is final: a 501, an untrusted
// certificate, a URL of no known scheme.
func Transient(err error) (ok bool, after time.Duration) {
	var e *Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
			http.StatusGatewayTimeout, http.StatusTooManyRequests:
			return true, e.RetryAfter
		}
		return false, 0
	}
	// Every error of the HTTP client is a url.Error, itself a net.Error:
	// what it wraps says what happened.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	var ne net.Error
	return errors.As(err, &oe) || (errors.As(err, &ne) && ne.Timeout()) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF), 0
}

// Client talks to one server with one token.
type Client struct {
	// BaseURL is the server's root, such as http://localhost:8080; the
	// client adds /api/v1.
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// New returns a client with a timeout on every request.
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Do sends a request with body (nil, or a value marshalled as JSON) and
// decodes the answer into out (nil to discard it).
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := c.BaseURL + "/api/v1" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rdr io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode the request: %w", err)
		}
		rdr = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rdr)
	if err != nil {
		return fmt.Errorf("server URL %q: %w", c.BaseURL, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("reach the server at %s: %w (check the URL given to `bindery login` or BINDERY_URL)", c.BaseURL, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read the answer of %s %s: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		e := &Error{Status: res.StatusCode, RetryAfter: backoff.RetryAfter(res.Header.Get("Retry-After"), time.Now())}
		_ = json.Unmarshal(raw, e)
		return e
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	// Numbers stay as the server wrote them (json.Number) where out holds
	// any: -o json|yaml and the credential formats print them so, where
	// float64 would change an integer past 2^53 or 1e21's text.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// Get reads one object.
func (c *Client) Get(ctx context.Context, path string, query url.Values) (Object, error) {
	var o Object
	err := c.Do(ctx, http.MethodGet, path, query, nil, &o)
	return o, err
}

// List reads every page of a list.
func (c *Client) List(ctx context.Context, path string, query url.Values) ([]Object, error) {
	return ListOf[Object](ctx, c, path, query)
}

// ListOf reads every page of a list, decoding each item as T. A table
// decodes only the fields it shows into a struct: for a list of 1,000
// instances that is a fraction of the time and memory of whole objects.
func ListOf[T any](ctx context.Context, c *Client, path string, query url.Values) ([]T, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("limit", "1000")
	var all []T
	for {
		var page struct {
			Items    []T    `json:"items"`
			Continue string `json:"continue"`
		}
		if err := c.Do(ctx, http.MethodGet, path, q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.Continue == "" {
			return all, nil
		}
		q.Set("continue", page.Continue)
	}
}

// Path joins escaped segments into a path.
func Path(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// idleTimeout bounds how long an export waits for its answer, and then for
// each read of it: the server bounds the export as a whole.
const idleTimeout = 30 * time.Second

// Export copies the export (newline-delimited JSON) of path to w as it
// arrives, without decoding it, and returns how many objects (lines) it
// held and the revision of its snapshot. An answer other than 2xx is an
// *Error; an export the server cut short is an error after what came was
// written.
func (c *Client) Export(ctx context.Context, path string, query url.Values, w io.Writer) (objects int, revision string, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errIdle := fmt.Errorf("nothing came from the server for %s", idleTimeout)
	idle := time.AfterFunc(idleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()
	u := c.BaseURL + "/api/v1" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", fmt.Errorf("server URL %q: %w", c.BaseURL, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	hc := *c.HTTP
	hc.Timeout = 0 // the idle timer bounds it instead
	res, err := hc.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("reach the server at %s: %w (check the URL given to `bindery login` or BINDERY_URL)", c.BaseURL, orCause(ctx, err))
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		e := &Error{Status: res.StatusCode}
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		_ = json.Unmarshal(raw, e)
		return 0, "", e
	}
	buf := make([]byte, 64<<10)
	for {
		idle.Reset(idleTimeout)
		n, rerr := res.Body.Read(buf)
		objects += bytes.Count(buf[:n], []byte{'\n'})
		if _, err := w.Write(buf[:n]); err != nil {
			return objects, "", fmt.Errorf("write the export: %w", err)
		}
		if rerr == io.EOF {
			return objects, res.Header.Get("Bindery-Revision"), nil
		}
		if rerr != nil {
			return objects, "", fmt.Errorf("the export was cut short after %d objects (%w): what was written is not all of it; run it again", objects, orCause(ctx, rerr))
		}
	}
}

// orCause is ctx's cause of ending when it ended for one, else err.
func orCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}
