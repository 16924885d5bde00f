package collector

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/host"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// Plugins opens randomizers by plugin name and configuration, the built-ins
// in process and any other as a plugin binary (builtin.Open with the given
// options, e.g. plugin.WithPluginDir), and keeps each open for reuse until
// Close: a plugin process is started once per configuration, not per
// batch. It is safe for concurrent use.
//
//	ps := collector.NewPlugins(plugin.WithPluginDir(dir))
//	defer ps.Close()
//	err := accounting.Calibrate(ctx, p, ps.Open)
type Plugins struct {
	opts []plugin.Option
	mu   sync.Mutex
	open map[string]host.Plugin
	// closed are the restarts of plugins closed since, by plugin name.
	closed map[string]int64
}

// NewPlugins returns an empty Plugins that opens with builtin.Open(ctx,
// name, cfg, opts...).
func NewPlugins(opts ...plugin.Option) *Plugins {
	return &Plugins{opts: opts, open: map[string]host.Plugin{}, closed: map[string]int64{}}
}

// Open returns the randomizer of plugin name configured with cfg, opening
// it on first use. Its signature is a plan.Opener.
func (p *Plugins) Open(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
	b, err := json.Marshal(cfg) // map keys are sorted: a canonical key
	if err != nil {
		return nil, err
	}
	key := name + "\x00" + string(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.open[key]; ok {
		return r, nil
	}
	r, err := builtin.Open(ctx, name, cfg, p.opts...)
	if err != nil {
		return nil, err
	}
	p.open[key] = r
	return r, nil
}

// Close closes every randomizer opened (stopping plugin processes). The
// Plugins can be used again afterwards.
func (p *Plugins) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, r := range p.open {
		r.Close()
		p.closed[pluginName(k)] += r.Restarts()
		delete(p.open, k)
	}
	return nil
}

// restarts returns the plugin process restarts of every plugin opened,
// by plugin name (see host.Plugin.Restarts).
func (p *Plugins) restarts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := maps.Clone(p.closed)
	for k, r := range p.open {
		out[pluginName(k)] += r.Restarts()
	}
	return out
}

// pluginName returns the plugin name of a key of Plugins.open.
func pluginName(key string) string {
	name, _, _ := strings.Cut(key, "\x00")
	return name
}
