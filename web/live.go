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
// change that match selects commits, until the page goes away. The
// browser reconnects a second after a lost stream (retry), and then gets
// the current state at once.
func (s *Server) live(c echo.Context, match func(change) bool, render func() ([]sseEvent, error)) error {
	ctx := c.Request().Context()
	sub, stop, err := s.feed.subscribe(ctx, match)
	if err != nil {
		return err
	}
	defer stop()
	st := openStream(c)
	defer st.ping.Stop()
	checked := time.Now()
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
		return st.write(events)
	}
	err = send()
	for err == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.wake:
			err = send()
		case <-st.ping.C:
			if st.keepAlive() != nil {
				return nil
			}
		}
	}
	if !errors.Is(err, catalog.ErrNoSession) {
		return s.liveEnd(err)
	}
	// Signed out, expired or revoked: the page is told, and gets nothing
	// more. The stream stays open (quiet) until the page leaves: a stream
	// the server closes makes the browser try again, and complain.
	stop()
	if st.write([]sseEvent{{"ended", endedNotice}}) != nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-st.ping.C:
			if st.keepAlive() != nil {
				return nil
			}
		}
	}
}

// stream is an open event stream.
type stream struct {
	w    *echo.Response
	ping *time.Ticker
}

// openStream answers with an event stream; its first field tells the
// browser to reconnect a second after losing it (three, unsaid).
func openStream(c echo.Context) *stream {
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("retry: 1000\n\n"))
	return &stream{w: w, ping: time.NewTicker(25 * time.Second)}
}

// lineEnds are what end a line of an event stream: CRLF, LF and a lone CR
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream).
// html/template leaves a CR in text as it is.
var lineEnds = strings.NewReplacer("\r\n", "\n", "\r", "\n")

// write sends events, each line of their HTML a data line. A line is
// wherever the browser sees one: a broker's text with a lone CR (a last
// error, a condition's message) must not end a data line and start a
// field of its own (event:, data:, id:, retry:), which would let it
// forge events.
func (st *stream) write(events []sseEvent) error {
	var buf bytes.Buffer
	for _, e := range events {
		buf.WriteString("event: " + e.Name + "\n")
		for _, line := range strings.Split(lineEnds.Replace(e.HTML), "\n") {
			buf.WriteString("data: " + line + "\n")
		}
		buf.WriteString("\n")
	}
	if _, err := st.w.Write(buf.Bytes()); err != nil {
		return err
	}
	st.w.Flush()
	return nil
}

// keepAlive sends a comment, so that proxies keep a quiet stream open.
func (st *stream) keepAlive() error {
	if _, err := st.w.Write([]byte(": ping\n\n")); err != nil {
		return err
	}
	st.w.Flush()
	return nil
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
