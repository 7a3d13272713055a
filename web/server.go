// Package web is Bindery's web UI, served at / by the catalog server:
// server-rendered pages (html/template, embedded and parsed once) over the
// catalog's domain layer, htmx for the partial updates and server-sent
// events for live status. One file holds one page or action; the web
// package holds no SQL and no rule of its own: it calls catalog.Store,
// which checks and records everything, and renders.
//
// A browser signs in with an API token and keeps only a session id
// (package session); the role of the token decides what each page offers
// and is checked again on every request. Every form carries a CSRF token
// (package csrf), and the Content-Security-Policy allows no inline script
// or style.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/message"
	"github.com/bindery-dev/bindery/internal/share"
	"github.com/bindery-dev/bindery/web/csrf"
	"github.com/bindery-dev/bindery/web/session"
)

// SessionTTL is how long a sign-in lasts.
const SessionTTL = 12 * time.Hour

// contentSecurityPolicy allows the UI's own scripts, styles and event
// streams, and nothing inline.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Server is the web UI.
type Server struct {
	store *catalog.Store
	log   *slog.Logger
	pages pages
	feed  *feed
	// market caches the marketplace by catalog revision.
	market marketCache
	// share bounds each token's requests and live streams (nil: no
	// bound); the REST API beside the UI takes from the same.
	share *share.Share
}

// New returns the web UI over store. It panics if the embedded templates
// do not parse, which a test catches.
func New(store *catalog.Store, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := parsePages()
	if err != nil {
		panic("web: " + err.Error())
	}
	return &Server{store: store, log: log, pages: p, feed: newFeed(store, log)}
}

// Register mounts the UI on e at /. Other routes of e (the REST API under
// /api/v1, /healthz, /metrics) are left as they are. sh bounds each
// token's requests (nil: no bound): the REST API's, so that a token is one
// party whichever door it uses.
func Register(e *echo.Echo, store *catalog.Store, log *slog.Logger, sh *share.Share) *Server {
	s := New(store, log)
	s.share = sh
	s.Register(e)
	return s
}

// Register mounts the UI's routes on e.
func (s *Server) Register(e *echo.Echo) {
	// Pages and scripts go compressed, at the fastest level: a page of a
	// thousand plans then costs a third of the CPU for a few kB more.
	// Event streams must not be buffered by a compressor.
	// The marketplace compresses itself, around a table compressed once.
	gzip := middleware.GzipWithConfig(middleware.GzipConfig{Level: 1, Skipper: func(c echo.Context) bool {
		return strings.HasPrefix(c.Request().URL.Path, "/live/") || c.Path() == "/"
	}})
	e.GET("/static/*", s.static, gzip)
	g := e.Group("", gzip, s.headers, s.input, echo.WrapMiddleware(func(next http.Handler) http.Handler {
		return csrf.Protect(next, s.forged)
	}), s.authenticate, s.shared)
	viewer, developer, admin := s.need(catalog.RoleViewer), s.need(catalog.RoleDeveloper), s.need(catalog.RoleAdmin)

	g.GET("/login", s.h(s.loginForm))
	g.POST("/login", s.form(s.login))
	g.POST("/logout", s.h(s.logout))

	g.GET("/", s.h(s.marketplace), viewer)
	g.GET("/services/:id", s.h(s.serviceShow), viewer)
	g.GET(iconRoute, s.h(s.serviceIcon), viewer)
	g.GET("/plans/:id", s.h(s.planShow), viewer)

	// A broker is the cluster's or a namespace's own (?namespace= in its
	// addresses): its scope decides which admins may change it, as in the
	// REST API. The handlers check it once they have read the broker.
	g.GET("/brokers", s.h(s.brokerList), viewer)
	g.POST("/brokers", s.form(s.brokerCreate), admin)
	g.POST("/brokers/:id/relist", s.h(s.brokerRelist), admin)
	g.GET("/brokers/:id/delete", s.h(s.brokerDeleteConfirm), admin)
	g.POST("/brokers/:id/delete", s.form(s.brokerDelete), admin)
	g.GET("/brokers/:id/events", s.h(s.history(kindBroker)), viewer)

	g.GET("/instances", s.h(s.instanceList), viewer)
	g.GET("/instances/new", s.h(s.instanceNew), developer)
	g.POST("/instances", s.form(s.instanceCreate), developer)
	g.GET("/instances/:id", s.h(s.instanceShow), viewer)
	g.POST("/instances/:id", s.form(s.instanceUpdate), developer)
	g.GET("/instances/:id/delete", s.h(s.instanceDeleteConfirm), developer)
	g.POST("/instances/:id/delete", s.form(s.instanceDelete), developer)
	g.GET("/instances/:id/abandon", s.h(s.instanceAbandonConfirm), developer)
	g.POST("/instances/:id/abandon", s.form(s.instanceAbandon), developer)
	g.GET("/instances/:id/events", s.h(s.history(kindInstance)), viewer)
	g.GET("/namespaces/:namespace/instances/:name", s.h(s.instanceNamed), viewer)
	g.POST("/instances/:id/bindings", s.form(s.bindingCreate), developer)

	g.GET("/bindings", s.h(s.bindingList), viewer)
	g.GET("/bindings/:id", s.h(s.bindingShow), viewer)
	g.POST("/bindings/:id/reveal", s.h(s.bindingReveal), developer)
	g.GET("/bindings/:id/delete", s.h(s.bindingDeleteConfirm), developer)
	g.POST("/bindings/:id/delete", s.form(s.bindingDelete), developer)
	g.GET("/bindings/:id/abandon", s.h(s.bindingAbandonConfirm), developer)
	g.POST("/bindings/:id/abandon", s.form(s.bindingAbandon), developer)
	g.GET("/bindings/:id/events", s.h(s.history(kindBinding)), viewer)

	// Quotas: admins for all namespaces (clusterAdmin).
	g.GET("/quotas", s.h(s.quotaList), admin)
	g.POST("/quotas", s.form(s.quotaSet), admin)
	g.POST("/quotas/delete", s.h(s.quotaDelete), admin)

	g.GET("/live/instances", s.h(s.liveInstances), viewer)
	g.GET("/live/instances/:id", s.h(s.liveInstance), viewer)
	g.GET("/live/bindings", s.h(s.liveBindings), viewer)
	g.GET("/live/bindings/:id", s.h(s.liveBinding), viewer)
	g.GET("/live/brokers", s.h(s.liveBrokers), viewer)
}

// headers sets the security headers of every page.
func (s *Server) headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// authenticate reads the session, if any, and with it the current role and
// namespaces of its token.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := session.ID(c.Request())
		if id == "" {
			return next(c)
		}
		sess, err := s.store.LookupSession(c.Request().Context(), id)
		switch {
		case errors.Is(err, catalog.ErrNoSession):
			session.Clear(c.Response(), c.Request())
		case err != nil:
			return s.fail(c, err)
		default:
			c.Set(sessionKey, sess)
		}
		return next(c)
	}
}

// shared takes a signed-in request's share of its token (internal/share):
// a live page's stream is one of the token's open streams, any other
// request holds one of its slots while it is served. Beyond them, 429
// with Retry-After. Requests without a session (the sign-in page) take
// none.
func (s *Server) shared(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		sess, ok := c.Get(sessionKey).(catalog.Session)
		if !ok || s.share.Max() <= 0 {
			return next(c)
		}
		var done func()
		switch {
		case strings.HasPrefix(c.Request().URL.Path, "/live/"):
			done = s.share.Open(sess.TokenID)
		case c.Path() == iconRoute:
			// A marketplace page's icons come all at once: they wait
			// their turn, and are not refused for their number.
			done = s.share.AcquireQueued(c.Request().Context(), sess.TokenID)
		default:
			done = s.share.Acquire(c.Request().Context(), sess.TokenID)
		}
		if done == nil {
			c.Response().Header().Set("Retry-After", "1")
			return s.renderError(c, http.StatusTooManyRequests, fmt.Sprintf(
				"The token you signed in with has %d requests being served, %d waiting or %d live pages open, the most one token may have: wait a moment, or close some of its pages.",
				s.share.Max(), share.WaitingPerSlot*s.share.Max(), share.StreamsPerSlot*s.share.Max()))
		}
		defer done()
		return next(c)
	}
}

// need refuses a request whose role does not include want: to the sign-in
// page without a session, 403 with one.
func (s *Server) need(want string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			have := role(c)
			if have == "" {
				if c.Request().Method == http.MethodGet && c.Request().Header.Get("HX-Request") == "" && c.Request().Header.Get("Accept") != "text/event-stream" {
					return c.Redirect(http.StatusSeeOther, "/login?next="+urlQueryEscape(c.Request().URL.RequestURI()))
				}
				return s.renderError(c, http.StatusUnauthorized, "Sign in first.")
			}
			if !catalog.Allows(have, want) {
				return s.renderError(c, http.StatusForbidden, "This needs the "+want+" role; you are signed in as "+have+".")
			}
			return next(c)
		}
	}
}

// h adapts a handler that returns errors into one that renders them. A
// request with posted text the catalog could not store is refused before
// fn runs (400, naming the field).
func (s *Server) h(fn func(echo.Context) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		if len(inputProblems(c)) > 0 {
			return s.refuseProblems(c)
		}
		if err := fn(c); err != nil {
			return s.fail(c, err)
		}
		return nil
	}
}

// form is h for the handlers of forms: they show the problems of posted
// text (inputProblems) next to their fields themselves, with 400, and
// send nothing of such input to the catalog.
func (s *Server) form(fn func(echo.Context) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := fn(c); err != nil {
			return s.fail(c, err)
		}
		return nil
	}
}

// fail renders an error of the domain layer as a page with its status.
func (s *Server) fail(c echo.Context, err error) error {
	var he *echo.HTTPError
	if q, ok := catalog.AsQuota(err); ok {
		// The sentence every door shows.
		return s.renderError(c, http.StatusForbidden, q.Error())
	}
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return s.renderError(c, http.StatusNotFound, message.Gone(pageKind(c.Path())))
	case errors.Is(err, catalog.ErrConflict):
		return s.renderError(c, http.StatusConflict, problem(err, "It conflicts with the object's current state: look at it again and retry."))
	case errors.Is(err, catalog.ErrUnprocessable):
		return s.renderError(c, http.StatusUnprocessableEntity, problem(err, "The object's current state does not allow this."))
	case errors.As(err, &he):
		msg, _ := he.Message.(string)
		if msg == "" {
			msg = http.StatusText(he.Code)
		}
		return s.renderError(c, he.Code, msg)
	}
	if v, ok := catalog.AsValidation(err); ok {
		return s.renderError(c, http.StatusBadRequest, v.Sentence())
	}
	if errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil {
		// The client left: nobody reads an answer. A context.Canceled of
		// other work (a marketplace view built for a request that left,
		// say) with the request's own context alive is a failure.
		return nil
	}
	s.log.ErrorContext(c.Request().Context(), "web request failed", "method", c.Request().Method, "path", c.Path(), "error", err)
	return s.renderError(c, http.StatusInternalServerError, "Something went wrong; the server's log has the details.")
}

// pageKind is the kind of object a route is about ("instance" for
// /instances/:id/…), or "" for one about none.
func pageKind(route string) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(route, "/"), "/")
	switch first {
	case "instances", "bindings", "brokers":
		return first
	case "plans":
		return "serviceplans"
	case "services":
		return "serviceclasses"
	}
	return ""
}

func (s *Server) forged(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	_ = s.pages.render(w, "error", pageData{Title: "Refused", Status: http.StatusForbidden, Message: msg})
}
