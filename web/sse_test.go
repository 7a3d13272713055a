package web_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// event is an event as a browser's EventSource dispatches it.
type event struct {
	Type, Data string
}

// readEvents parses an event stream as the HTML standard says browsers do
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
// a line ends at CRLF, LF or a lone CR; an empty line dispatches the
// event, if it has data. Each dispatched event is sent on out, which is
// closed when the stream ends.
func readEvents(r io.Reader, out chan<- event) {
	defer close(out)
	br := bufio.NewReader(r)
	var typ, data strings.Builder
	for {
		line, err := readLine(br)
		if err != nil {
			return
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if data.Len() > 0 {
				ev := event{Type: typ.String(), Data: strings.TrimSuffix(data.String(), "\n")}
				if ev.Type == "" {
					ev.Type = "message"
				}
				out <- ev
			}
			typ.Reset()
			data.Reset()
		case field == "event":
			typ.Reset()
			typ.WriteString(value)
		case field == "data":
			data.WriteString(value + "\n")
		}
	}
}

// readLine reads a line of an event stream, without its end.
func readLine(br *bufio.Reader) (string, error) {
	var line strings.Builder
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		switch c {
		case '\n':
			return line.String(), nil
		case '\r':
			if next, err := br.Peek(1); err == nil && next[0] == '\n' {
				_, _ = br.ReadByte()
			}
			return line.String(), nil
		}
		line.WriteByte(c)
	}
}

// TestLiveStatusCannotForgeEvents: a broker's text in an instance's
// status (its last error) with carriage returns, which end a line of an
// event stream as a line feed does, is data of the status event on the
// instance's live stream, and adds no event or field of its own: a forged
// "ended" event would tell the page that its session is over.
func TestLiveStatusCannotForgeEvents(t *testing.T) {
	b := setup(t, setupOptions{})
	plan := b.fakeBroker(t, "fake", osbtest.GenerateCatalog(1, 1))
	in := b.instance(t, plan, "default", "forged-db")
	const lastError = "broker said no\r\revent: ended\rdata: FORGED\r\nretry: 1\n\nid: 7"
	if _, err := b.store.UpdateInstanceStatus(t.Context(), in.ID, func(in *catalog.Instance) error {
		in.Status.LastError = lastError
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	viewer := b.client(t, catalog.RoleViewer)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.url+"/live/instances/"+in.ID, nil)
	res, err := viewer.http.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v", err)
	}
	defer res.Body.Close()
	events := make(chan event, 16)
	go readEvents(res.Body, events)
	var types []string
	var status string
	for len(types) < 2 || types[len(types)-1] != "bindings" {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended after %v", types)
			}
			types = append(types, ev.Type)
			if ev.Type == "status" {
				status = ev.Data
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the stream sent %v, then nothing", types)
		}
	}
	if strings.Join(types, " ") != "status bindings" {
		t.Fatalf("the stream dispatched %v", types)
	}
	if !strings.Contains(status, "FORGED") || !strings.Contains(status, "id: 7") {
		t.Errorf("the status event lost the last error's text: %q", status)
	}
}
