// Package serve runs Bindery's HTTP servers the same way: the probes and
// metrics every server has (/healthz, /readyz, /metrics), request logging
// without bodies or credentials, and a graceful shutdown when the context ends.
package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is a readiness check, such as a database ping.
type Check func(ctx context.Context) error

// NewRegistry returns a Prometheus registry with the Go runtime's and the
// process's collectors, which every server's /metrics includes.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewEcho returns an echo instance that logs every request to log (see
// RequestLog), with the probes and metrics mounted (reg's; no /metrics for a
// nil reg, for a server that mounts its own). ready checks are run on
// every /readyz request.
func NewEcho(log *slog.Logger, reg *prometheus.Registry, ready ...Check) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.JSONSerializer = plainJSON{}
	e.Use(RequestLog(log))
	e.Use(Recover(log))
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Response().Header().Set("X-Content-Type-Options", "nosniff")
			return next(c)
		}
	})
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		for _, check := range ready {
			if err := check(ctx); err != nil {
				return c.String(http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
			}
		}
		return c.String(http.StatusOK, "ok\n")
	})
	if reg != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	}
	return e
}

// Recover turns a panic while serving a request into an error, which the
// server's error handler answers with a 500: net/http would otherwise cut
// the connection, and the client would get no answer it can act on. The
// panic and its stack go to log. The error goes back up through the
// middleware above, so that the request log and metrics see the 500.
func Recover(log *slog.Logger) echo.MiddlewareFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableErrorHandler: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			log.ErrorContext(c.Request().Context(), "panic while serving a request",
				"method", c.Request().Method, "path", c.Path(), "panic", err, "stack", string(stack))
			return fmt.Errorf("panic: %w", err)
		},
	})
}

// plainJSON writes JSON answers with &, < and > as they are: credentials
// (a JDBC URL's query, a password) read as the broker gave them, not as
// \u0026. The escapes are for JSON put into HTML; every answer says
// nosniff, so none is read as HTML. Reading is echo's.
type plainJSON struct{ echo.DefaultJSONSerializer }

func (plainJSON) Serialize(c echo.Context, i any, indent string) error {
	enc := json.NewEncoder(c.Response())
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	return enc.Encode(i)
}

// RequestLog logs one line per request at info level (debug for the
// probes and /metrics, which scrapers call every few seconds): method, path,
// status and latency. The query string is left out (a token or password may
// ride in it), and so are headers and bodies.
func RequestLog(log *slog.Logger) echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogMethod:   true,
		LogURIPath:  true,
		LogStatus:   true,
		LogLatency:  true,
		HandleError: true, // the status logged is the one the error handler sends
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			switch v.URIPath {
			case "/healthz", "/readyz", "/metrics":
				level = slog.LevelDebug
			}
			log.LogAttrs(c.Request().Context(), level, "request",
				slog.String("method", v.Method),
				slog.String("path", v.URIPath),
				slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency))
			return nil
		},
	})
}

// CheckListen reports a listen address net.Listen cannot take, naming
// flag, the flag that set it: HOST:PORT, the port a number from 0 to
// 65535 (0 picks a free one) or a service name.
func CheckListen(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("%s %q: want HOST:PORT with a port in 0-65535 (0 picks a free one)", flag, addr)
	}
	return nil
}

// Listen opens addr, which flag set (checked by CheckListen); a port of 0
// picks a free one (see Addr on the listener). An address another process
// holds is reported as the flag's.
func Listen(flag, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", flag, addr, err)
	}
	return l, nil
}

// drainGrace is how long requests in flight at a shutdown may go on before
// their contexts are cancelled.
const drainGrace = time.Second

// stopWait bounds the whole shutdown: what has not returned by then is
// left behind. With the other parts of a process stopping beside it, every
// server exits within 10 seconds of SIGTERM (docs/operations.md), well
// inside Kubernetes' default grace period of 30 seconds.
const stopWait = 5 * time.Second

// IdleTimeout is how long a server keeps a connection that waits for its
// next request. Without one, net/http keeps it for good (its idle timeout
// falls back to ReadTimeout, which would cut event streams and watches,
// and is not set): whoever can reach a port could hold a file descriptor
// and a goroutine of the process per connection opened and left idle.
// 90 s is the idle timeout of Go's and client-go's own transports, so a
// client's pooled connections are not closed under it as a rule.
const IdleTimeout = 90 * time.Second

// idleTimeout is IdleTimeout, shortened by tests.
var idleTimeout = IdleTimeout

// Run serves h on l until ctx ends, then shuts down gracefully: requests in
// flight get a second to finish on their own, then their contexts are
// cancelled — a catalogue fetch from a broker that does not answer, or an
// event stream, would otherwise hold the shutdown for as long as it lasts —
// and up to stopWait in all to return.
func Run(ctx context.Context, l net.Listener, h http.Handler, log *slog.Logger) error {
	reqCtx, stopRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRequests()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	drained := time.AfterFunc(drainGrace, stopRequests)
	defer drained.Stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
