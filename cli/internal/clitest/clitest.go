// Package clitest runs the CLI's verbs against a scripted REST API, as
// gh's httpmock registry does for its commands: each test says what the
// server answers to each request, runs a verb through its run function
// (or its whole command line) on buffers, and compares what it printed
// exactly.
package clitest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// Server is a scripted REST API.
type Server struct {
	t      testing.TB
	srv    *httptest.Server
	mu     sync.Mutex
	routes []route
	// Requests are the requests made, "METHOD /path?query" (without
	// /api/v1), with their bodies after a space when they had one.
	Requests []string
}

type route struct {
	method, path, query string
	status              int
	body                string
	header              http.Header
	times               int // 0: every time
}

// New starts a server that answers 404 to anything not scripted.
func New(t testing.TB) *Server {
	s := &Server{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// On scripts the answer to METHOD /path (under /api/v1; a query after ?
// must match exactly, else any query does): status and a JSON body.
func (s *Server) On(method, path string, status int, body string) *Server {
	return s.OnWith(method, path, status, body, nil, 0)
}

// Once is On for the next matching request only; later ones fall through
// to the routes scripted after it.
func (s *Server) Once(method, path string, status int, body string) *Server {
	return s.OnWith(method, path, status, body, nil, 1)
}

// OnWith is On with headers, answered times times (0: always).
func (s *Server) OnWith(method, path string, status int, body string, header http.Header, times int) *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, q, _ := strings.Cut(path, "?")
	s.routes = append(s.routes, route{method: method, path: p, query: q, status: status, body: body, header: header, times: times})
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	path := strings.TrimPrefix(r.URL.Path, "/api/v1")
	s.mu.Lock()
	req := r.Method + " " + path
	if r.URL.RawQuery != "" {
		req += "?" + r.URL.RawQuery
	}
	if len(raw) > 0 {
		req += " " + string(raw)
	}
	s.Requests = append(s.Requests, req)
	for i := range s.routes {
		rt := &s.routes[i]
		if rt.method != r.Method || rt.path != path || (rt.query != "" && rt.query != r.URL.RawQuery) || rt.times < 0 {
			continue
		}
		if rt.times > 0 {
			rt.times--
			if rt.times == 0 {
				rt.times = -1
			}
		}
		s.mu.Unlock()
		for k, v := range rt.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rt.status)
		_, _ = io.WriteString(w, rt.body)
		return
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, `{"error":"not_found","message":"Not scripted: `+r.Method+` `+path+`"}`)
}

// Streams are a verb's output buffers.
type Streams struct{ Out, Err *bytes.Buffer }

// Factory returns a factory whose client reaches the server, writing to
// buffers; terminal says whether stdout and stderr count as terminals
// (of 100 columns).
func (s *Server) Factory(terminal bool) (*cmdutil.Factory, Streams) {
	st := Streams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
	f := cmdutil.NewFactory(cmdutil.IOStreams{In: strings.NewReader(""), Out: st.Out, ErrOut: st.Err, IsTerminal: terminal,
		OutTerm: output.Term{On: terminal, Width: 100}})
	f.Getenv = func(string) string { return "" }
	f.SetClient(api.New(s.srv.URL, "test-token"))
	return f, st
}

// URL is the server's address.
func (s *Server) URL() string { return s.srv.URL }

// Root is a root command with the persistent flags the CLI's root has
// (-n, -o) over verbs, for running a package's verbs by command line.
func Root(f *cmdutil.Factory, verbs ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{Use: "bindery", SilenceErrors: true, SilenceUsage: true}
	pf := root.PersistentFlags()
	pf.StringVarP(&f.Namespace, "namespace", "n", "", "")
	cmdutil.EnumVar(root, pf, &f.Output, "output", "o", "", []string{"table", "json", "yaml", "env", "dotenv", "env-file"}, "")
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.AddCommand(verbs...)
	return root
}
