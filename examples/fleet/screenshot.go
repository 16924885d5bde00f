package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/blanket-dp/blanket/internal/browser"
)

// dashboardWidth and dashboardHeight are the viewport of the screenshot;
// the picture holds the whole page, however long.
const dashboardWidth, dashboardHeight = 1400, 900

// screenshot writes a PNG of the server's dashboard (GET /) to path, drawn
// by a headless Chromium once the page has read the API. Without Chromium
// it says so on w and returns nil: the dashboard is then only at its URL.
func screenshot(ctx context.Context, endpoint, path string, w io.Writer) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	b, err := browser.Start(ctx)
	if errors.Is(err, browser.ErrNoChromium) {
		fmt.Fprintf(w, "dashboard: %s/ (no screenshot: %v)\n", endpoint, err)
		return nil
	}
	if err != nil {
		return err
	}
	defer b.Close()
	p, err := b.Open(ctx, endpoint+"/", dashboardWidth, dashboardHeight)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.WaitRenders(ctx, 1); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := p.Screenshot(ctx, path); err != nil {
		return err
	}
	fmt.Fprintf(w, "dashboard: %s/ (screenshot in %s, drawn in %s)\n", endpoint, path, time.Since(start).Round(100*time.Millisecond))
	for _, s := range p.Problems() {
		fmt.Fprintf(w, "dashboard: the page reported: %s\n", s)
	}
	return nil
}
