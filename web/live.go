package web

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/session"
)

// sseEvent is one server-sent event: htmx's SSE extension swaps data into
// the element whose sse-swap names the event.
type sseEvent struct {
	Name, HTML string
}

// live streams render's events to the page now and again whenever a
// change that match selects commits, until the page goes away.
func (s *Server) live(c echo.Context, match func(change) bool, render func() ([]sseEvent, error)) error {
	ctx := c.Request().Context()
	sub, stop, err := s.feed.subscribe(ctx, match)
	if err != nil {
		return err
	}
	defer stop()
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	checked := time.Now()
	write := func(events []sseEvent) error {
		var buf bytes.Buffer
		for _, e := range events {
			buf.WriteString("event: " + e.Name + "\n")
			for _, line := range strings.Split(e.HTML, "\n") {
				buf.WriteString("data: " + line + "\n")
			}
			buf.WriteString("\n")
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		w.Flush()
		return nil
	}
	send := func() error {
		// A stream outlives no session: updates check it again (at most
		// once a second, so a burst of changes costs one query).
		if time.Since(checked) > sessionRecheck {
			if _, err := s.store.LookupSession(ctx, session.ID(c.Request())); err != nil {
				return err
			}
			checked = time.Now()
		}
		events, err := render()
		if err != nil {
			return err
		}
		return write(events)
	}
	ping := time.NewTicker(25 * time.Second)
	defer ping.Stop()
	err = send()
	for err == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.wake:
			err = send()
		case <-ping.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return nil
			}
			w.Flush()
		}
	}
	if !errors.Is(err, catalog.ErrNoSession) {
		return s.liveEnd(err)
	}
	// Signed out, expired or revoked: the page is told, and gets nothing
	// more. The stream stays open (quiet) until the page leaves: a stream
	// the server closes makes the browser try again, and complain.
	stop()
	if err := write([]sseEvent{{"ended", endedNotice}}); err != nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ping.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return nil
			}
			w.Flush()
		}
	}
}

// endedNotice is what a live page shows once its session has ended.
const endedNotice = `<p class="notice" role="status">Live updates have stopped: this session has ended. <a href="/login">Sign in</a> again and reload the page.</p>`

// sessionRecheck is how often an open stream checks its session.
const sessionRecheck = time.Second

// liveEnd ends a stream quietly when the page left or the object went
// away; the page's own link keeps working.
func (s *Server) liveEnd(err error) error {
	if errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrNoSession) {
		return nil
	}
	return err
}

func (s *Server) renderString(c echo.Context, page, name string, data any) (string, error) {
	var buf bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&buf, name, s.data(c, "", "", data)); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// liveInstance keeps an instance's page current: its status and its
// bindings. An instance the session may not see is not found.
func (s *Server) liveInstance(c echo.Context) error {
	id := c.Param("id")
	if _, err := s.instance(c, id); err != nil {
		return err
	}
	return s.live(c, func(ch change) bool {
		return ch.ObjectID == id || (ch.Kind == catalog.KindBinding && ch.InstanceID == id)
	}, func() ([]sseEvent, error) {
		v, err := s.instanceView(c, id, nil, nil)
		if errors.Is(err, catalog.ErrNotFound) {
			return []sseEvent{{"status", `<p class="notice">This instance has been deleted.</p>`}}, nil
		}
		if err != nil {
			return nil, err
		}
		status, err := s.renderString(c, "instance", "instance-status", v)
		if err != nil {
			return nil, err
		}
		bindings, err := s.renderString(c, "instance", "instance-bindings", v)
		if err != nil {
			return nil, err
		}
		return []sseEvent{{"status", status}, {"bindings", bindings}}, nil
	})
}

// liveBinding keeps a binding's status current. A binding the session may
// not see is not found.
func (s *Server) liveBinding(c echo.Context) error {
	id := c.Param("id")
	if _, err := s.binding(c, id); err != nil {
		return err
	}
	return s.live(c, func(ch change) bool { return ch.ObjectID == id }, func() ([]sseEvent, error) {
		v, err := s.bindingView(c, id)
		if errors.Is(err, catalog.ErrNotFound) {
			return []sseEvent{{"status", `<p class="notice">This binding has been deleted.</p>`}}, nil
		}
		if err != nil {
			return nil, err
		}
		status, err := s.renderString(c, "binding", "binding-status", v)
		if err != nil {
			return nil, err
		}
		return []sseEvent{{"status", status}}, nil
	})
}

// listChanges selects the changes of kind that a list page asking for q
// shows: in its namespace, or in any the session may see. Other
// namespaces' changes do not even wake the stream.
func listChanges(c echo.Context, kind string, q listQuery) func(change) bool {
	sess, _ := sessionOf(c)
	return func(ch change) bool {
		if ch.Kind != kind || !sess.AllowsNamespace(ch.Namespace) {
			return false
		}
		return q.Namespace == "" || ch.Namespace == q.Namespace
	}
}

// liveInstances keeps a page of the instances list current.
func (s *Server) liveInstances(c echo.Context) error {
	q, err := readListQuery(c)
	if err != nil {
		return err
	}
	return s.live(c, listChanges(c, catalog.KindInstance, q), func() ([]sseEvent, error) {
		v, err := s.instanceListData(c)
		if err != nil {
			return nil, err
		}
		list, err := s.renderString(c, "instances", "instance-list", v)
		return []sseEvent{{"list", list}}, err
	})
}

// liveBindings keeps a page of the bindings list current.
func (s *Server) liveBindings(c echo.Context) error {
	q, err := readListQuery(c)
	if err != nil {
		return err
	}
	return s.live(c, listChanges(c, catalog.KindBinding, q), func() ([]sseEvent, error) {
		v, err := s.bindingListData(c)
		if err != nil {
			return nil, err
		}
		list, err := s.renderString(c, "bindings", "binding-list", v)
		return []sseEvent{{"list", list}}, err
	})
}

// liveBrokers keeps the brokers table current: the cluster's brokers and
// those of the session's namespaces. Other namespaces' brokers changing do
// not even wake the stream.
func (s *Server) liveBrokers(c echo.Context) error {
	sess, _ := sessionOf(c)
	return s.live(c, func(ch change) bool {
		return ch.Kind == catalog.KindBroker || (ch.Kind == catalog.KindNamespacedBroker && sess.AllowsNamespace(ch.Namespace))
	}, func() ([]sseEvent, error) {
		rows, err := s.brokerRows(c)
		return []sseEvent{{"rows", rows}}, err
	})
}
