package web_test

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/bindery-dev/bindery/internal/eventually"
)

//go:embed testdata/axe.min.js
var axeSource string

// browser is one headless Chromium tab, with what its pages logged.
type browser struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// problems are console errors, uncaught exceptions and browser log
	// errors (CSP violations among them).
	problems []string
	allowed  []string
	shots    int
	// name tells a second tab's screenshots apart.
	name string
}

func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: install it (apt-get install chromium)")
	return ""
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	// The profile is removed by the cleanup below, after the browser is
	// stopped and with retries: Chromium's helper processes may still be
	// writing to it for a moment after the browser itself has exited, which
	// made t.TempDir's own removal fail now and then.
	profile, err := os.MkdirTemp("", "bindery-web-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-gpu", true),
		// Tabs in the background (pages left open on a list) keep running
		// their timers and drawing, as a visible window's would.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(profile),
	}
	// This test's screenshots of an earlier run go: what is left is this
	// run's.
	old, _ := filepath.Glob(filepath.Join(artifacts(t), strings.ReplaceAll(t.Name(), "/", "_")+"-*.png"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	b.listen()
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot("failure")
		}
		cancelCtx()
		cancelAlloc()
		if err := eventually.Poll(context.Background(), 10*time.Second, func(context.Context) error { return os.RemoveAll(profile) }); err != nil {
			t.Logf("browser profile %s left behind: %v", profile, err)
		}
	})
	return b
}

// tab opens another tab of the same browser (the same cookies: the same
// person with two pages open).
func (b *browser) tab(name string) *browser {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	tb := &browser{t: b.t, ctx: ctx, name: name}
	tb.allowed = append(tb.allowed, b.allowed...)
	tb.listen()
	b.t.Cleanup(func() {
		if b.t.Failed() {
			tb.screenshot("failure")
		}
		cancel()
	})
	return tb
}

// listen records the tab's console errors, exceptions and log errors.
func (b *browser) listen() {
	chromedp.ListenTarget(b.ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.problem("console error: " + strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			b.problem("exception: " + ev.ExceptionDetails.Text + " " + describe(ev.ExceptionDetails.Exception))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.LevelError {
				b.problem("browser log: " + ev.Entry.Text + " " + ev.Entry.URL)
			}
		}
	})
	if err := chromedp.Run(b.ctx, log.Enable()); err != nil {
		b.t.Fatal(err)
	}
}

func describe(o *runtime.RemoteObject) string {
	if o == nil {
		return ""
	}
	return o.Description
}

func (b *browser) problem(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.allowed {
		if strings.Contains(s, a) {
			return
		}
	}
	b.problems = append(b.problems, s)
}

// checkClean fails the test on any console error seen so far.
func (b *browser) checkClean(where string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		b.t.Errorf("%s: the browser reported:\n%s", where, strings.Join(b.problems, "\n"))
		b.problems = nil
	}
}

func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// artifacts is where screenshots go: $WEB_ARTIFACTS, or testdata/artifacts
// (ignored by git).
func artifacts(t *testing.T) string {
	dir := os.Getenv("WEB_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (b *browser) screenshot(name string) {
	var buf []byte
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	// A tab is drawn, and so photographed, in front only.
	if err := chromedp.Run(ctx, page.BringToFront(), chromedp.FullScreenshot(&buf, 100)); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.shots++
	if b.name != "" {
		name = b.name + "-" + name
	}
	p := filepath.Join(artifacts(b.t), fmt.Sprintf("%s-%02d-%s.png", strings.ReplaceAll(b.t.Name(), "/", "_"), b.shots, name))
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

// axe runs axe-core in the page and fails on serious or critical
// violations; then it takes the page's screenshot.
func (b *browser) axe(name string) {
	b.t.Helper()
	var loaded bool
	b.run(chromedp.Evaluate(axeSource+";true", &loaded))
	var violations []string
	b.run(chromedp.Evaluate(`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => v.impact + " " + v.id + ": " + v.help + " at " + v.nodes.map(n => n.target.join(" ")).join(", ")))`,
		&violations, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	for _, v := range violations {
		b.t.Errorf("%s: accessibility: %s", name, v)
	}
	b.screenshot(name)
	b.checkClean(name)
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.run(chromedp.Text(sel, &s, chromedp.ByQuery))
	return strings.TrimSpace(s)
}

func (b *browser) html() string {
	b.t.Helper()
	var s string
	b.run(chromedp.OuterHTML("html", &s, chromedp.ByQuery))
	return s
}

// waitText waits until the element's text contains want.
func (b *browser) waitText(sel, want string, within time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within)
	defer cancel()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : ""; })()`, sel)
	for {
		var s string
		if err := chromedp.Run(ctx, chromedp.Evaluate(js, &s)); err != nil {
			b.t.Fatalf("waiting for %q in %s: %v", want, sel, err)
		}
		if strings.Contains(s, want) {
			return
		}
		select {
		case <-ctx.Done():
			b.t.Fatalf("waiting for %q in %s: still %q", want, sel, s)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clear empties an input.
func (b *browser) clear(sel string) {
	b.t.Helper()
	b.run(chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).value = ""`, sel), nil))
}

// allow lets the browser log messages containing any of subs: answers the
// test provokes on purpose.
func (b *browser) allow(subs ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed = append(b.allowed, subs...)
}
