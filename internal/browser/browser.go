// Package browser drives a headless Chromium (Debian's chromium package)
// through the DevTools protocol with chromedp, for the dashboard's tests
// and `make demo`'s screenshot: it opens a page, waits until the page says
// it has drawn, reads values from it, collects its console errors and
// uncaught exceptions, and takes full-page screenshots.
//
//	b, err := browser.Start(ctx)
//	defer b.Close()
//	p, err := b.Open(ctx, url, 1400, 900)
//	err = p.WaitRenders(ctx, 1)
//	err = p.Screenshot(ctx, "demo-out/dashboard.png")
//	problems := p.Problems()
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
)

// ErrNoChromium reports that no Chromium binary was found.
var ErrNoChromium = errors.New("browser: no Chromium found: install Debian's chromium package (make deps does, as root) or set BLANKET_CHROMIUM to the binary")

// Path returns the Chromium binary: $BLANKET_CHROMIUM when set, else the
// first of chromium, chromium-browser, google-chrome and google-chrome-stable
// on PATH.
func Path() (string, error) {
	if p := os.Getenv("BLANKET_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("browser: BLANKET_CHROMIUM=%s: %w", p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// Browser is one headless Chromium process with a fresh profile.
type Browser struct {
	// chromedp's API is its context: the browser and its tabs are
	// contexts, so they are kept here rather than passed by the caller.
	ctx     context.Context
	cancel  func()
	dataDir string

	mu sync.Mutex
	// firstUsed is set once a Page took the tab the browser starts with.
	firstUsed bool
}

// Start starts Chromium headless with a fresh profile in a temporary
// directory, without the sandbox (tests run as root), the GPU, or any
// background connection (the machine has no network beyond loopback; the
// page must not need one either). ctx bounds the browser's whole life.
func Start(ctx context.Context) (*Browser, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "blanket-chromium-")
	if err != nil {
		return nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(dir),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	b := &Browser{ctx: bctx, cancel: func() { bcancel(); acancel() }, dataDir: dir}
	// The first Run starts the process; it must not carry a timeout.
	if err := chromedp.Do(bctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("browser: starting %s: %w", path, err)
	}
	return b, nil
}

// Close stops the browser and removes its profile.
func (b *Browser) Close() {
	b.cancel()
	os.RemoveAll(b.dataDir)
}

// Page is one tab showing one URL.
type Page struct {
	ctx    context.Context
	cancel func()
	url    string

	mu       sync.Mutex
	problems []string
}

// Open opens url in a new tab with a viewport of width by height CSS
// pixels and waits for its load event. The tab's console errors, browser
// log errors (a failed request among them) and uncaught exceptions from
// then on are kept for Problems.
//
// The first page takes the tab the browser started with; later ones open
// new tabs. (Each tab decodes its events in its own goroutine, and with two
// tabs the race detector reports chromedp's concurrent decoding; one page
// per browser, as the tests and the demo use, runs one.)
func (b *Browser) Open(ctx context.Context, url string, width, height int) (*Page, error) {
	b.mu.Lock()
	first := !b.firstUsed
	b.firstUsed = true
	b.mu.Unlock()
	tctx, tcancel := b.ctx, func() {}
	if !first {
		tctx, tcancel = chromedp.NewContext(b.ctx)
	}
	p := &Page{ctx: tctx, cancel: tcancel, url: url}
	messages := chromedp.Console(tctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == "assert" {
				p.mu.Lock()
				p.problems = append(p.problems, m.String())
				p.mu.Unlock()
			}
		}
	}()
	err := p.run(ctx, chromedp.Steps(
		chromedp.EmulateViewport(int64(width), int64(height)),
		chromedp.Navigate(url),
	))
	if err != nil {
		tcancel()
		return nil, fmt.Errorf("browser: opening %s: %w", url, err)
	}
	return p, nil
}

// run runs steps in the tab, bounded by ctx as well as the tab's life.
func (p *Page) run(ctx context.Context, steps chromedp.Action[chromedp.Void]) error {
	rctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	return chromedp.Do(rctx, steps)
}

// Eval evaluates a JavaScript expression in the page and decodes its
// value (JSON-able) into out.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	rctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	v, err := chromedp.Run(rctx, chromedp.Evaluate[any](expr))
	if err != nil {
		return fmt.Errorf("browser: evaluating %q: %w", expr, err)
	}
	if out == nil {
		return nil
	}
	return remarshal(v, out)
}

// WaitRenders waits until the page's body has data-renders of at least n
// (the dashboard counts its draws there), or ctx ends.
func (p *Page) WaitRenders(ctx context.Context, n int) error {
	expr := fmt.Sprintf("Number(document.body && document.body.dataset.renders || 0) >= %d", n)
	for {
		var ok bool
		if err := p.Eval(ctx, expr, &ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("browser: %s did not draw %d time(s): %w", p.url, n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Screenshot writes a PNG of the whole page (beyond the viewport) to path.
func (p *Page) Screenshot(ctx context.Context, path string) error {
	rctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	png, err := chromedp.Run(rctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("browser: screenshot of %s: %w", p.url, err)
	}
	return os.WriteFile(path, png, 0o644)
}

// Problems returns the console errors, browser log errors and uncaught
// exceptions seen since Open, one line each.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// Close closes the tab (the browser's first tab closes with the browser).
func (p *Page) Close() { p.cancel() }

// String names the page.
func (p *Page) String() string { return strings.TrimSpace("page " + p.url) }

// remarshal decodes a value decoded into any again into out.
func remarshal(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
