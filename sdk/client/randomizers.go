package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/plugins/longitudinal"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/host"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// RandomizerCache opens each configured randomizer once and shares it. A
// Provider opens the randomizer of every plan metric through its cache; by
// default each Provider has its own, but a simulation running many
// Providers in one process passes one cache to all of them
// (Config.Randomizers) so that they share the randomizers (and, for plugin
// binaries, the plugin processes). It is safe for concurrent use.
type RandomizerCache struct {
	open plan.Opener

	mu     sync.Mutex
	m      map[string]*cached
	closed bool
}

type cached struct {
	ready chan struct{} // closed when r, desc and err are set
	r     sdk.Randomizer
	desc  *sdk.Description
	err   error
}

// NewRandomizerCache returns an empty cache that opens randomizers with
// open. A nil open opens the DefaultRandomizers in process
// (InProcess(DefaultRandomizers())).
func NewRandomizerCache(open plan.Opener) *RandomizerCache {
	if open == nil {
		open = InProcess(DefaultRandomizers())
	}
	return &RandomizerCache{open: open, m: map[string]*cached{}}
}

// DefaultRandomizers returns a new map of the randomizers a Provider opens
// by default, in process: krr, hadamard, rappor, summation and
// longitudinal. Blanket's sixth, laplace, is not among them: its sampler,
// Google's differential-privacy library, links gonum (about 10 MB of an
// app's binary), and summation estimates a sum or a mean with less error
// at the same central guarantee (examples/meanerror). An app whose plan
// names laplace, or a randomizer served by a plugin binary, opts in
// through Config.Randomizers:
//
//	f := client.DefaultRandomizers()
//	f[laplace.Name] = sdk.FactoryOf(laplace.FromConfig) // laplace, in process
//	cfg.Randomizers = client.NewRandomizerCache(client.InProcess(f))
//
//	// every built-in in process, any other name a plugin binary from dir
//	// (links go-plugin and gRPC):
//	cfg.Randomizers = client.NewRandomizerCache(builtin.Opener(plugin.WithPluginDir(dir)))
func DefaultRandomizers() map[string]sdk.Factory {
	return map[string]sdk.Factory{
		krr.Name:          sdk.FactoryOf(krr.FromConfig),
		hadamard.Name:     sdk.FactoryOf(hadamard.FromConfig),
		rappor.Name:       sdk.FactoryOf(rappor.FromConfig),
		summation.Name:    sdk.FactoryOf(summation.FromConfig),
		longitudinal.Name: sdk.FactoryOf(longitudinal.FromConfig),
	}
}

// InProcess returns an opener of the randomizers of factories, called in
// process (host.Builtin). A name not among them fails with an error
// wrapping sdk.ErrPluginNotFound that says how to link it.
func InProcess(factories map[string]sdk.Factory) plan.Opener {
	return func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		p, err := host.Builtin(name, cfg, factories)
		if errors.Is(err, sdk.ErrPluginNotFound) {
			return nil, fmt.Errorf("%w (this app opens %s in process; Config.Randomizers links others)", err, strings.Join(slices.Sorted(maps.Keys(factories)), ", "))
		}
		return p, err
	}
}

// Open returns the randomizer of plugin name configured with cfg and its
// description, opening it on first use. A failed open is not cached.
func (c *RandomizerCache) Open(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, *sdk.Description, error) {
	key, err := json.Marshal(struct {
		Name string
		Cfg  sdk.Config
	}{name, cfg})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: randomizer configuration: %v", ErrBadConfig, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("client: randomizer cache: %w", ErrShutdown)
	}
	e, ok := c.m[string(key)]
	if !ok {
		// First caller: open. Later callers wait for this result; a
		// failure is removed so that the next Open tries again.
		e = &cached{ready: make(chan struct{})}
		c.m[string(key)] = e
		c.mu.Unlock()
		e.r, e.desc, e.err = c.openDescribe(ctx, name, cfg)
		if e.err != nil {
			c.mu.Lock()
			if c.m != nil {
				delete(c.m, string(key))
			}
			c.mu.Unlock()
		}
		close(e.ready)
		return e.r, e.desc, e.err
	}
	c.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return e.r, e.desc, e.err
}

func (c *RandomizerCache) openDescribe(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, *sdk.Description, error) {
	r, err := c.open(ctx, name, cfg)
	if err != nil {
		return nil, nil, err
	}
	d, err := r.Describe(ctx)
	if err != nil {
		if cl, ok := r.(io.Closer); ok {
			cl.Close()
		}
		return nil, nil, err
	}
	return r, d, nil
}

// Close closes every randomizer the cache opened (those that are
// io.Closers, such as host.Plugin). Providers using the cache must be shut
// down first. Close is idempotent.
func (c *RandomizerCache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	m := c.m
	c.m = nil
	c.mu.Unlock()
	var errs []error
	for _, e := range m {
		<-e.ready
		if cl, ok := e.r.(io.Closer); ok && e.err == nil {
			errs = append(errs, cl.Close())
		}
	}
	return errors.Join(errs...)
}
