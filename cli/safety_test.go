package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/cli/internal/clitest"
)

// hostile is broker text that would act on a terminal: it sets the window
// title, clears the screen, returns to the start of the line, reverses
// what follows (bidi override), starts a C1 CSI sequence and deletes.
const hostile = "evil\x1b]0;pwned\x07\x1b[2J\rX\u202eY\u009b31m\x7f\u2066end"

// hostileAPI scripts a REST API whose every string a person might see is
// hostile.
func hostileAPI(t *testing.T) *clitest.Server {
	h, _ := json.Marshal(hostile)
	hs := string(h)
	cond := `{"type":"Ready","status":"False","reason":"ErrorFetchingCatalog","message":` + hs + `,"lastTransitionTime":"2026-01-01T00:00:00Z"}`
	broker := `{"id":"b1","name":"b","spec":{"url":"http://b"},"status":{"conditions":[` + cond + `]}}`
	instance := `{"id":"i1","name":"db","namespace":"default","generation":1,"spec":{"clusterServiceClassExternalName":"pg","clusterServicePlanExternalName":"small","parameters":{` + hs + `:1}},
		"status":{"lastError":` + hs + `,"dashboardURL":` + hs + `,"conditions":[{"type":"Ready","status":"False","reason":` + hs + `,"message":` + hs + `}]},
		"progress":{"state":"failed","reason":"X","message":` + hs + `,"detail":` + hs + `},"warnings":[` + hs + `]}`
	blocked := strings.Replace(instance, `"state":"failed"`, `"state":"blocked"`, 1)
	binding := `{"id":"a1","name":"app","namespace":"default","spec":{"instanceRef":{"name":"db"},"secretName":` + hs + `},
		"status":{"conditions":[{"type":"Ready","status":"False","reason":"Binding","message":` + hs + `}]},"progress":{"state":"blocked","message":` + hs + `}}`
	events := `{"items":[{"time":"2026-01-01T00:00:00Z","type":"Warning","reason":` + hs + `,"message":` + hs + `}]}`
	return clitest.New(t).
		On("GET", "/serviceclasses", 200, `{"items":[{"name":"c1","spec":{"externalName":"pg","description":`+hs+`,"clusterServiceBrokerName":`+hs+`}}]}`).
		On("GET", "/serviceclasses/pg", 200, `{"name":"c1","spec":{"externalName":"pg"}}`).
		On("GET", "/serviceplans", 200, `{"items":[{"name":"p1","spec":{"externalName":"small","description":`+hs+`,"clusterServiceClassRef":{"name":"c1"}}}]}`).
		On("GET", "/brokers", 200, `{"items":[`+broker+`]}`).
		On("POST", "/brokers", 201, broker).
		On("POST", "/brokers/b/relist", 200, broker).
		On("GET", "/brokers/b", 200, broker).
		On("GET", "/brokers/b1/events", 200, events).
		On("GET", "/instances", 200, `{"items":[`+instance+`]}`).
		On("POST", "/instances", 201, instance).
		On("PATCH", "/instances/db", 200, instance).
		On("DELETE", "/instances/db", 202, blocked).
		On("GET", "/instances/db", 200, instance).
		On("GET", "/instances/i1", 200, blocked).
		On("GET", "/instances/i1/events", 200, events).
		On("GET", "/instances/nope", 404, `{"error":"not_found","message":`+hs+`}`).
		On("GET", "/bindings", 200, `{"items":[`+binding+`]}`).
		On("POST", "/bindings", 201, binding).
		On("GET", "/bindings/app", 200, binding).
		On("GET", "/bindings/a1", 200, binding).
		On("GET", "/bindings/a1/events", 200, events)
}

// TestNoTerminalEscapes runs every verb that prints server or broker text
// against hostile text, with stdout a terminal and a pipe: nothing a
// terminal acts on reaches the output, and the text is shown visibly.
func TestNoTerminalEscapes(t *testing.T) {
	t.Parallel()
	lines := [][]string{
		{"marketplace"}, {"marketplace", "-c", "pg"}, {"brokers", "list"}, {"brokers", "register", "b", "http://b"}, {"brokers", "relist", "b"},
		{"instances"}, {"bindings"}, {"describe", "instance", "db"}, {"describe", "binding", "app"}, {"describe", "broker", "b"},
		{"describe", "instance", "nope"}, {"provision", "db", "-c", "pg", "-p", "small", "--wait"}, {"update", "db", "-p", "small", "--wait"},
		{"deprovision", "db", "--wait"}, {"bind", "app", "--instance", "db", "--wait"},
	}
	for _, terminal := range []bool{false, true} {
		for _, args := range lines {
			srv := hostileAPI(t)
			f, st := srv.Factory(terminal)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			code := run(ctx, f, "bindery", args, Server{})
			cancel()
			// The spinner's own "return and clear the line" is the CLI's.
			all := strings.ReplaceAll(st.Out.String()+st.Err.String(), "\r\x1b[K", "")
			for _, bad := range []string{"\x1b", "\r", "\x07", "\u202e", "\u2066", "\u009b", "\x7f"} {
				if strings.Contains(all, bad) {
					t.Errorf("terminal=%v bindery %s (exit %d) printed %q raw:\n%q", terminal, strings.Join(args, " "), code, bad, all)
				}
			}
			if !strings.Contains(all, `evil\x1b]0;pwned\x07\x1b[2J\rX\u202eY`) {
				t.Errorf("terminal=%v bindery %s (exit %d) does not show the text visibly:\n%s", terminal, strings.Join(args, " "), code, all)
			}
		}
	}
}
