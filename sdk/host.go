package sdk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// Host defaults and names.
const (
	// PluginDirEnv names the environment variable holding the default plugin
	// directory of Open.
	PluginDirEnv = "BLANKET_PLUGIN_DIR"
	// BinaryPrefix is the prefix of plugin binary names: the binary of
	// plugin "krr" is blanket-krr (blanket-krr.exe on Windows).
	BinaryPrefix = "blanket-"
	// DefaultCallTimeout bounds every RPC to a plugin process unless
	// WithCallTimeout says otherwise.
	DefaultCallTimeout = 30 * time.Second
	// DefaultStartTimeout bounds starting a plugin process and its
	// handshake unless WithStartTimeout says otherwise.
	DefaultStartTimeout = 15 * time.Second
)

// maxRequestBytes bounds the estimated size of one Randomize or Accumulate
// request or response; larger batches are split into several RPCs, so that
// a huge batch neither meets the message limit nor one call timeout.
const maxRequestBytes = 16 << 20

// wireOverhead bounds the protobuf bytes a repeated bytes or string element
// adds to its content (a tag and a length varint up to 2^28).
const wireOverhead = 5

// killGrace is how long a graceful plugin shutdown may take before the
// process is killed.
const killGrace = 5 * time.Second

var pluginNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// OpenOption is an optional setting of Open.
type OpenOption func(*openOptions)

type openOptions struct {
	builtins     map[string]Factory
	dir          string
	dirSet       bool
	checksum     []byte
	callTimeout  time.Duration
	startTimeout time.Duration
	logger       hclog.Logger
	maxRequest   int // bytes; maxRequestBytes except in tests
}

// WithBuiltins makes Open serve the named randomizers in process, before
// looking for binaries. Defaults to none; package sdk/builtin has the four
// Blanket randomizers.
func WithBuiltins(b map[string]Factory) OpenOption {
	return func(o *openOptions) { o.builtins = b }
}

// WithPluginDir sets the directory searched for blanket-<name> binaries.
// Defaults to $BLANKET_PLUGIN_DIR; with neither, only built-ins are found.
func WithPluginDir(dir string) OpenOption {
	return func(o *openOptions) { o.dir, o.dirSet = dir, true }
}

// WithChecksum pins the SHA-256 checksum of the plugin binary: the binary is
// hashed before every start (including restarts) and refused, with an error
// wrapping ErrPluginFailed and plugin.ErrChecksumsDoNotMatch, when it
// differs. A checksum that is not 32 bytes long (an empty one included)
// fails Open with ErrBadConfig; nil means no check. Ignored for built-ins.
// Defaults to no check.
func WithChecksum(sha256Sum []byte) OpenOption {
	return func(o *openOptions) { o.checksum = bytes.Clone(sha256Sum) }
}

// WithCallTimeout bounds each RPC to the plugin process. A call that
// exceeds it fails with an error wrapping ErrPluginFailed and
// context.DeadlineExceeded, and the process, presumed hung, is killed and
// restarted on the next call. Defaults to DefaultCallTimeout.
func WithCallTimeout(d time.Duration) OpenOption {
	return func(o *openOptions) { o.callTimeout = d }
}

// WithStartTimeout bounds starting the plugin process and the go-plugin
// handshake. Defaults to DefaultStartTimeout.
func WithStartTimeout(d time.Duration) OpenOption {
	return func(o *openOptions) { o.startTimeout = d }
}

// WithLogger receives go-plugin's logs and the plugin process's own log
// lines (hclog JSON on its stderr). Defaults to discarding them.
func WithLogger(l hclog.Logger) OpenOption {
	return func(o *openOptions) { o.logger = l }
}

// Plugin is a configured randomizer opened by Open: built in and called
// directly, or served by a plugin process. It implements Randomizer, and
// OutputMapper and Stateful for the randomizers that do (host_stateful.go),
// and is safe for concurrent use.
//
// For a plugin process, every call has a timeout (WithCallTimeout); a
// process that crashed or stopped answering is killed and a new one is
// started and configured, and a call that failed because the process died
// is retried once (every RPC is idempotent: a Randomize result the host
// never received was never seen). Batches too large for one message are
// split into several RPCs. Errors the plugin returns unwrap to the same
// sentinels as in process.
type Plugin struct {
	name   string
	path   string // "" for a built-in
	cfg    Config
	o      openOptions
	inproc Randomizer
	desc   *Description // of the first configured process

	closed atomic.Bool
	mu     sync.Mutex // guards proc and starting a process
	proc   *process
	dying  sync.WaitGroup
	// restarts counts processes started after the first.
	restarts atomic.Int64
}

type process struct {
	client *plugin.Client
	cmd    *exec.Cmd
	rpc    *GRPCClient
}

var _ Randomizer = (*Plugin)(nil)

// Open returns the randomizer of plugin name configured with cfg: the
// built-in of that name when one was passed with WithBuiltins, else the
// executable blanket-<name> in the plugin directory, started as a
// hashicorp/go-plugin subprocess (gRPC only, protocol version 1, AutoMTLS),
// handshaken and configured before Open returns.
//
// The caller must Close the Plugin; a plugin process also exits by itself
// when its host dies. A program that may exit on a signal with plugins open
// should call CleanupPlugins from its signal handler.
//
// Errors wrap ErrBadConfig (an invalid name, option or configuration),
// ErrPluginNotFound, ErrPluginFailed, or ctx's error.
//
//	r, err := sdk.Open(ctx, "krr", sdk.Config{Categories: cats}, sdk.WithPluginDir("/usr/lib/blanket"))
//	if err != nil { ... }
//	defer r.Close()
//	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: values})
func Open(ctx context.Context, name string, cfg Config, opts ...OpenOption) (*Plugin, error) {
	o := openOptions{callTimeout: DefaultCallTimeout, startTimeout: DefaultStartTimeout, maxRequest: maxRequestBytes}
	for _, opt := range opts {
		opt(&o)
	}
	if o.callTimeout <= 0 {
		return nil, fmt.Errorf("%w: call timeout %v, must be positive", ErrBadConfig, o.callTimeout)
	}
	if o.startTimeout <= 0 {
		return nil, fmt.Errorf("%w: start timeout %v, must be positive", ErrBadConfig, o.startTimeout)
	}
	if o.checksum != nil && len(o.checksum) != sha256.Size {
		return nil, fmt.Errorf("%w: checksum has %d bytes, a SHA-256 checksum has %d", ErrBadConfig, len(o.checksum), sha256.Size)
	}
	if o.logger == nil {
		o.logger = hclog.NewNullLogger()
	}
	if !pluginNameRE.MatchString(name) {
		return nil, fmt.Errorf("%w: plugin name %q must match %s", ErrBadConfig, name, pluginNameRE)
	}
	if f, ok := o.builtins[name]; ok {
		r, err := f(cfg)
		if err != nil {
			return nil, err
		}
		return &Plugin{name: name, cfg: cfg, o: o, inproc: r}, nil
	}
	path, err := findBinary(name, o)
	if err != nil {
		return nil, err
	}
	p := &Plugin{name: name, path: path, cfg: cfg, o: o}
	proc, err := p.start(ctx)
	if err != nil {
		return nil, err
	}
	p.proc = proc
	return p, nil
}

// findBinary returns the absolute path of the plugin binary of name.
func findBinary(name string, o openOptions) (string, error) {
	dir := o.dir
	if !o.dirSet {
		dir = os.Getenv(PluginDirEnv)
	}
	if dir == "" {
		return "", fmt.Errorf("%w: %q is not built in and no plugin directory is set (WithPluginDir or $%s)", ErrPluginNotFound, name, PluginDirEnv)
	}
	file := BinaryPrefix + name
	if runtime.GOOS == "windows" {
		file += ".exe"
	}
	path, err := filepath.Abs(filepath.Join(dir, file))
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrPluginNotFound, name, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not built in and %s does not exist", ErrPluginNotFound, name, path)
	}
	if !fi.Mode().IsRegular() || (runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0) {
		return "", fmt.Errorf("%w: %s is not an executable file", ErrPluginNotFound, path)
	}
	return path, nil
}

// CleanupPlugins kills every plugin process started by Open (it calls
// go-plugin's CleanupClients). Call it once, from a signal handler or just
// before the program exits; a Plugin used afterwards starts a new process.
func CleanupPlugins() { plugin.CleanupClients() }

// Name returns the plugin name passed to Open.
func (p *Plugin) Name() string { return p.name }

// Path returns the plugin binary's absolute path, or "" for a built-in.
func (p *Plugin) Path() string { return p.path }

// Close stops the plugin process and waits until it has exited. Calls after
// Close fail with ErrClosed. Close is idempotent and always returns nil.
func (p *Plugin) Close() error {
	p.mu.Lock()
	p.closed.Store(true)
	proc := p.proc
	p.proc = nil
	p.mu.Unlock()
	if proc != nil {
		p.terminate(proc)
	}
	p.dying.Wait()
	return nil
}

func (p *Plugin) errClosed() error {
	return fmt.Errorf("%w: %s", ErrClosed, p.name)
}

// start starts, handshakes and configures a new plugin process.
func (p *Plugin) start(ctx context.Context) (*process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	startTimeout := p.o.startTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < startTimeout {
		startTimeout = time.Until(dl)
	}
	cmd := exec.Command(p.path)
	cc := &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: PluginSets(nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Managed:          true,
		StartTimeout:     startTimeout,
		Logger:           p.o.logger.Named(p.name),
		GRPCDialOptions:  dialOptions(),
	}
	if p.o.checksum != nil {
		cc.SecureConfig = &plugin.SecureConfig{Checksum: p.o.checksum, Hash: sha256.New()}
	}
	proc := &process{client: plugin.NewClient(cc), cmd: cmd}
	fail := func(format string, args ...any) (*process, error) {
		p.terminate(proc)
		return nil, fmt.Errorf("%w: plugin %s: "+format, append([]any{ErrPluginFailed, p.name}, args...)...)
	}
	conn, err := proc.client.Client()
	if err != nil {
		return fail("starting %s: %w", p.path, err)
	}
	raw, err := conn.Dispense(PluginName)
	if err != nil {
		return fail("%w", err)
	}
	rpc, ok := raw.(*GRPCClient)
	if !ok {
		return fail("dispensed a %T", raw)
	}
	cctx, cancel := context.WithTimeout(ctx, p.o.callTimeout)
	desc, err := rpc.Configure(cctx, p.cfg)
	cancel()
	switch {
	case errors.Is(err, ErrBadConfig):
		p.terminate(proc)
		return nil, fmt.Errorf("plugin %s: %w", p.name, err)
	case err != nil:
		return fail("configuring: %w", err)
	case desc.Name != p.name:
		return fail("%s describes itself as %q", p.path, desc.Name)
	case p.desc != nil && desc.Digest != p.desc.Digest:
		return fail("restarted process has configuration digest %q, was %q", desc.Digest, p.desc.Digest)
	}
	if p.desc == nil {
		p.desc = desc
	}
	proc.rpc = rpc
	return proc, nil
}

// terminate stops a process: gracefully through go-plugin, then by SIGKILL
// if that takes longer than killGrace (a stopped or wedged process).
func (p *Plugin) terminate(proc *process) {
	done := make(chan struct{})
	go func() {
		proc.client.Kill()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(killGrace):
		if proc.cmd.Process != nil {
			_ = proc.cmd.Process.Kill()
		}
		<-done
	}
}

// discard drops proc as the current process and stops it in the
// background; Close waits for it. A process that is no longer current was
// already handed to terminate by whoever replaced it, and after Close the
// current one is Close's to stop.
func (p *Plugin) discard(proc *process) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != proc || p.closed.Load() {
		return
	}
	p.proc = nil
	p.dying.Add(1)
	go func() {
		defer p.dying.Done()
		p.terminate(proc)
	}()
}

// current returns the running process, starting one if there is none or it
// has exited.
func (p *Plugin) current(ctx context.Context) (*process, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	if p.proc != nil && !p.proc.client.Exited() {
		return p.proc, nil
	}
	if old := p.proc; old != nil {
		p.proc = nil
		p.dying.Add(1)
		go func() {
			defer p.dying.Done()
			p.terminate(old)
		}()
	}
	proc, err := p.start(ctx)
	if err != nil {
		return nil, err
	}
	p.proc = proc
	p.restarts.Add(1)
	return proc, nil
}

// Running reports whether the plugin answers without starting a process:
// a built-in not closed, or a plugin process running. It never starts a
// process and never waits for a start in progress (false then), so a
// readiness probe may call it at any rate.
func (p *Plugin) Running() bool {
	if p.closed.Load() {
		return false
	}
	if p.inproc != nil {
		return true
	}
	if !p.mu.TryLock() {
		return false // a process is being started
	}
	defer p.mu.Unlock()
	return p.proc != nil && !p.proc.client.Exited()
}

// Restarts returns how many plugin processes were started to replace one
// that exited, hung past the call timeout or failed its transport: 0 for
// a built-in, which runs in process.
func (p *Plugin) Restarts() int64 { return p.restarts.Load() }

// pid returns the process id of the running plugin process, or 0.
func (p *Plugin) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil || p.proc.cmd.Process == nil {
		return 0
	}
	return p.proc.cmd.Process.Pid
}

// call runs f against the plugin process with the call timeout, restarting
// a dead process and retrying once.
func (p *Plugin) call(ctx context.Context, method string, f func(context.Context, *GRPCClient) error) error {
	for attempt := 0; ; attempt++ {
		proc, err := p.current(ctx)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, p.o.callTimeout)
		err = f(cctx, proc.rpc)
		// Deadlines are judged by the clock: a context's Err stays nil
		// until its timer has run, and the call may already have failed at
		// its deadline (the plugin's gRPC server resets the stream then).
		now := time.Now()
		callerDone := expired(ctx, now)
		timedOut := !callerDone && expired(cctx, now)
		cancel()
		switch {
		case err == nil:
			return nil
		case callerDone:
			cerr := ctx.Err()
			if cerr == nil {
				cerr = context.DeadlineExceeded
			}
			return fmt.Errorf("plugin %s: %s: %w", p.name, method, cerr)
		case timedOut:
			p.discard(proc)
			return fmt.Errorf("%w: plugin %s: %s did not answer within %v: %w", ErrPluginFailed, p.name, method, p.o.callTimeout, context.DeadlineExceeded)
		case p.closed.Load():
			return p.errClosed()
		case transportFailure(err, proc):
			p.discard(proc)
			if attempt == 0 {
				p.o.logger.Warn("plugin process failed, restarting", "plugin", p.name, "method", method, "error", err)
				continue
			}
			return fmt.Errorf("%w: plugin %s: %s: %w", ErrPluginFailed, p.name, method, err)
		case errors.Is(err, ErrNotConfigured):
			p.discard(proc)
			return fmt.Errorf("%w: plugin %s: %s: %w", ErrPluginFailed, p.name, method, err)
		default:
			return fmt.Errorf("plugin %s: %w", p.name, err)
		}
	}
}

// expired reports whether ctx is done or its deadline is not after now.
func expired(ctx context.Context, now time.Time) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !now.Before(dl)
}

// transportFailure reports whether err means the process or connection is
// gone rather than an answer of the plugin.
func transportFailure(err error, proc *process) bool {
	var pe *PluginError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codes.Unavailable, codes.Canceled:
			return true
		}
		if pe.Reason == "" && proc.client.Exited() {
			return true
		}
		return false
	}
	return proc.client.Exited()
}

// Describe implements Randomizer.
func (p *Plugin) Describe(ctx context.Context) (*Description, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	if p.inproc != nil {
		return p.inproc.Describe(ctx)
	}
	var d *Description
	err := p.call(ctx, "Describe", func(ctx context.Context, c *GRPCClient) (err error) {
		d, err = c.Describe(ctx)
		return err
	})
	return d, err
}

// Declare implements Randomizer.
func (p *Plugin) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	if p.inproc != nil {
		return p.inproc.Declare(ctx, eps0)
	}
	var d *declare.Declaration
	err := p.call(ctx, "Declare", func(ctx context.Context, c *GRPCClient) (err error) {
		d, err = c.Declare(ctx, eps0)
		return err
	})
	return d, err
}

// Randomize implements Randomizer.
func (p *Plugin) Randomize(ctx context.Context, eps0 float64, in Inputs) ([][]byte, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	if p.inproc != nil {
		return p.inproc.Randomize(ctx, eps0, in)
	}
	n := in.Len()
	if len(in.Categories) > 0 && len(in.Reals) > 0 {
		n = 0 // invalid; one call, for the plugin to reject
	}
	outCost := p.desc.ReportBytes + wireOverhead
	cost := func(i int) int {
		if len(in.Reals) > 0 {
			return max(8, outCost)
		}
		return max(len(in.Categories[i])+wireOverhead, outCost)
	}
	// A bound on the cost of the whole batch (each max above is at most
	// the sum of its terms) spares the common batch, far below the limit,
	// the comparison per input.
	bound := n * (outCost + 8)
	for _, c := range in.Categories {
		bound += len(c) + wireOverhead
	}
	var out [][]byte
	for start, first := 0, true; first || start < n; first = false {
		end, size := start, 0
		if bound <= p.o.maxRequest {
			end = n
		}
		for end < n && (end == start || size+cost(end) <= p.o.maxRequest) {
			size += cost(end)
			end++
		}
		chunk := in
		if n > 0 && (start > 0 || end < n) {
			chunk = Inputs{}
			if len(in.Reals) > 0 {
				chunk.Reals = in.Reals[start:end]
			} else {
				chunk.Categories = in.Categories[start:end]
			}
		}
		var reports [][]byte
		err := p.call(ctx, "Randomize", func(ctx context.Context, c *GRPCClient) (err error) {
			reports, err = c.Randomize(ctx, eps0, chunk)
			return err
		})
		if err != nil {
			if start > 0 || end < n {
				return nil, fmt.Errorf("inputs [%d,%d): %w", start, end, err)
			}
			return nil, err
		}
		if out == nil {
			if end == n {
				return reports, nil
			}
			out = make([][]byte, 0, n)
		}
		out = append(out, reports...)
		start = end
	}
	return out, nil
}

// Outputs implements OutputMapper: a built-in answers if it is an
// OutputMapper, a plugin process if it implements the Outputs RPC; both
// fail otherwise with an error wrapping errors.ErrUnsupported. Large
// batches go in several calls, as in Accumulate.
func (p *Plugin) Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	if p.inproc != nil {
		om, ok := p.inproc.(OutputMapper)
		if !ok {
			return nil, fmt.Errorf("plugin %s: Outputs: %w", p.name, errors.ErrUnsupported)
		}
		return om.Outputs(ctx, eps0, reports)
	}
	var out []int
	for start, first := 0, true; first || start < len(reports); first = false {
		end, size := start, 0
		for end < len(reports) && (end == start || size+len(reports[end])+wireOverhead <= p.o.maxRequest) {
			size += len(reports[end]) + wireOverhead
			end++
		}
		err := p.call(ctx, "Outputs", func(ctx context.Context, c *GRPCClient) error {
			idx, err := c.Outputs(ctx, eps0, reports[start:end])
			out = append(out, idx...)
			return err
		})
		if err != nil {
			return nil, err
		}
		start = end
	}
	return out, nil
}

// Accumulate implements Randomizer.
func (p *Plugin) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*Statistic, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	if p.inproc != nil {
		return p.inproc.Accumulate(ctx, eps0, reports)
	}
	n := len(reports)
	var total *Statistic
	for start, first := 0, true; first || start < n; first = false {
		end, size := start, 0
		for end < n && (end == start || size+len(reports[end])+wireOverhead <= p.o.maxRequest) {
			size += len(reports[end]) + wireOverhead
			end++
		}
		var s *Statistic
		err := p.call(ctx, "Accumulate", func(ctx context.Context, c *GRPCClient) (err error) {
			s, err = c.Accumulate(ctx, eps0, reports[start:end])
			return err
		})
		if err != nil {
			return nil, err
		}
		if total == nil {
			total = s
		} else if err := total.Merge(s); err != nil {
			return nil, fmt.Errorf("%w: plugin %s: statistics of reports [0,%d) and [%d,%d) do not merge: %v", ErrPluginFailed, p.name, start, start, end, err)
		}
		start = end
	}
	return total, nil
}

// Estimate implements Randomizer.
func (p *Plugin) Estimate(ctx context.Context, stat *Statistic) (*Estimate, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	if p.inproc != nil {
		return p.inproc.Estimate(ctx, stat)
	}
	var e *Estimate
	err := p.call(ctx, "Estimate", func(ctx context.Context, c *GRPCClient) (err error) {
		e, err = c.Estimate(ctx, stat)
		return err
	})
	return e, err
}
