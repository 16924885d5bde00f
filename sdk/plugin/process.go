package plugin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/host"
	"github.com/blanket-dp/blanket/sdk/rpc"
)

// killGrace is how long a graceful plugin shutdown may take before the
// process is killed.
const killGrace = 5 * time.Second

// subprocess is the host.Plugin of a randomizer served by a plugin
// process, the other implementation being host's in-process one. Every call
// has a timeout (WithCallTimeout); a process that crashed or stopped
// answering is killed and a new one is started and configured, and a call
// that failed because the process died is retried once (every RPC is
// idempotent: a Randomize result the host never received was never seen).
// Batches too large for one message are split into several RPCs (split).
// Errors the plugin returns unwrap to the same sentinels as in process. It
// is safe for concurrent use.
type subprocess struct {
	name string
	path string
	cfg  sdk.Config
	o    options
	desc *sdk.Description // of the first configured process

	closed atomic.Bool
	mu     sync.Mutex // guards proc and starting a process
	proc   *process
	dying  sync.WaitGroup
	// restarts counts processes started after the first.
	restarts atomic.Int64
}

type process struct {
	client *goplugin.Client
	cmd    *exec.Cmd
	rpc    *rpc.Client
}

var _ host.Plugin = (*subprocess)(nil)

// startSubprocess starts the plugin binary at path and configures it.
func startSubprocess(ctx context.Context, name, path string, cfg sdk.Config, o options) (*subprocess, error) {
	p := &subprocess{name: name, path: path, cfg: cfg, o: o}
	proc, err := p.start(ctx)
	if err != nil {
		return nil, err
	}
	p.proc = proc
	return p, nil
}

// Name returns the plugin name passed to Open.
func (p *subprocess) Name() string { return p.name }

// Path returns the plugin binary's absolute path.
func (p *subprocess) Path() string { return p.path }

// Close stops the plugin process and waits until it has exited. Calls after
// Close fail with sdk.ErrClosed. Close is idempotent and always returns nil.
func (p *subprocess) Close() error {
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

func (p *subprocess) errClosed() error {
	return fmt.Errorf("%w: %s", sdk.ErrClosed, p.name)
}

// start starts, handshakes and configures a new plugin process.
func (p *subprocess) start(ctx context.Context) (*process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	startTimeout := p.o.startTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < startTimeout {
		startTimeout = time.Until(dl)
	}
	cmd := exec.Command(p.path)
	cmd.Env = pluginEnv(p.o.env) // env.go: the host's secrets stay out
	cc := &goplugin.ClientConfig{
		SkipHostEnv:      true,
		HandshakeConfig:  Handshake,
		VersionedPlugins: PluginSets(nil),
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		Managed:          true,
		StartTimeout:     startTimeout,
		Logger:           p.o.logger.Named(p.name),
		GRPCDialOptions:  rpc.DialOptions(),
	}
	if p.o.checksum != nil {
		cc.SecureConfig = &goplugin.SecureConfig{Checksum: p.o.checksum, Hash: sha256.New()}
	}
	proc := &process{client: goplugin.NewClient(cc), cmd: cmd}
	fail := func(format string, args ...any) (*process, error) {
		p.terminate(proc)
		return nil, fmt.Errorf("%w: plugin %s: "+format, append([]any{sdk.ErrPluginFailed, p.name}, args...)...)
	}
	conn, err := proc.client.Client()
	if err != nil {
		return fail("starting %s: %w", p.path, err)
	}
	raw, err := conn.Dispense(PluginName)
	if err != nil {
		return fail("%w", err)
	}
	client, ok := raw.(*rpc.Client)
	if !ok {
		return fail("dispensed a %T", raw)
	}
	cctx, cancel := context.WithTimeout(ctx, p.o.callTimeout)
	desc, err := client.Configure(cctx, p.cfg)
	cancel()
	switch {
	case errors.Is(err, sdk.ErrBadConfig):
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
	proc.rpc = client
	return proc, nil
}

// terminate stops a process: gracefully through go-plugin, then by SIGKILL
// if that takes longer than killGrace (a stopped or wedged process).
func (p *subprocess) terminate(proc *process) {
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
func (p *subprocess) discard(proc *process) {
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
func (p *subprocess) current(ctx context.Context) (*process, error) {
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

// Running reports whether a plugin process is running. It never starts a
// process and never waits for a start in progress (false then), so a
// readiness probe may call it at any rate.
func (p *subprocess) Running() bool {
	if p.closed.Load() {
		return false
	}
	if !p.mu.TryLock() {
		return false // a process is being started
	}
	defer p.mu.Unlock()
	return p.proc != nil && !p.proc.client.Exited()
}

// Restarts returns how many plugin processes were started to replace one
// that exited, hung past the call timeout or failed its transport.
func (p *subprocess) Restarts() int64 { return p.restarts.Load() }

// pid returns the process id of the running plugin process, or 0.
func (p *subprocess) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil || p.proc.cmd.Process == nil {
		return 0
	}
	return p.proc.cmd.Process.Pid
}

// call runs f against the plugin process with the call timeout, restarting
// a dead process and retrying once.
func (p *subprocess) call(ctx context.Context, method string, f func(context.Context, *rpc.Client) error) error {
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
			return fmt.Errorf("%w: plugin %s: %s did not answer within %v: %w", sdk.ErrPluginFailed, p.name, method, p.o.callTimeout, context.DeadlineExceeded)
		case p.closed.Load():
			return p.errClosed()
		case transportFailure(err, proc):
			p.discard(proc)
			if attempt == 0 {
				p.o.logger.Warn("plugin process failed, restarting", "plugin", p.name, "method", method, "error", err)
				continue
			}
			return fmt.Errorf("%w: plugin %s: %s: %w", sdk.ErrPluginFailed, p.name, method, err)
		case errors.Is(err, sdk.ErrNotConfigured):
			p.discard(proc)
			return fmt.Errorf("%w: plugin %s: %s: %w", sdk.ErrPluginFailed, p.name, method, err)
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
	var pe *rpc.PluginError
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

// Describe implements sdk.Randomizer.
func (p *subprocess) Describe(ctx context.Context) (*sdk.Description, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	var d *sdk.Description
	err := p.call(ctx, "Describe", func(ctx context.Context, c *rpc.Client) (err error) {
		d, err = c.Describe(ctx)
		return err
	})
	return d, err
}

// Declare implements sdk.Randomizer.
func (p *subprocess) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	var d *declare.Declaration
	err := p.call(ctx, "Declare", func(ctx context.Context, c *rpc.Client) (err error) {
		d, err = c.Declare(ctx, eps0)
		return err
	})
	return d, err
}

// DeclareForm implements sdk.FormDeclarer by the Declare RPC with a form:
// a plugin that does not implement it fails with an error wrapping
// errors.ErrUnsupported.
func (p *subprocess) DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	var d *declare.Declaration
	err := p.call(ctx, "Declare", func(ctx context.Context, c *rpc.Client) (err error) {
		d, err = c.DeclareForm(ctx, eps0, form)
		return err
	})
	return d, err
}

// Randomize implements sdk.Randomizer.
func (p *subprocess) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
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
	ranges := [][2]int{{0, n}}
	if bound > p.o.maxRequest {
		ranges = split(n, p.o.maxRequest, cost)
	}
	if len(ranges) == 1 {
		var reports [][]byte
		err := p.call(ctx, "Randomize", func(ctx context.Context, c *rpc.Client) (err error) {
			reports, err = c.Randomize(ctx, eps0, in)
			return err
		})
		if err != nil {
			return nil, err
		}
		return reports, nil
	}
	out := make([][]byte, 0, n)
	for _, r := range ranges {
		chunk := inputsRange(in, r)
		var reports [][]byte
		err := p.call(ctx, "Randomize", func(ctx context.Context, c *rpc.Client) (err error) {
			reports, err = c.Randomize(ctx, eps0, chunk)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("inputs [%d,%d): %w", r[0], r[1], err)
		}
		out = append(out, reports...)
	}
	return out, nil
}

// inputsRange returns the inputs of in in the range r.
func inputsRange(in sdk.Inputs, r [2]int) sdk.Inputs {
	if len(in.Reals) > 0 {
		return sdk.Inputs{Reals: in.Reals[r[0]:r[1]]}
	}
	return sdk.Inputs{Categories: in.Categories[r[0]:r[1]]}
}

// Outputs implements sdk.OutputMapper by the Outputs RPC: a plugin that
// does not implement it fails with an error wrapping errors.ErrUnsupported.
// Large batches go in several calls, as in Accumulate.
func (p *subprocess) Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	var out []int
	for _, r := range split(len(reports), p.o.maxRequest, reportCost(reports)) {
		err := p.call(ctx, "Outputs", func(ctx context.Context, c *rpc.Client) error {
			idx, err := c.Outputs(ctx, eps0, reports[r[0]:r[1]])
			out = append(out, idx...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Atoms implements sdk.AtomMapper by the Atoms RPC: a plugin that does
// not implement it fails with an error wrapping errors.ErrUnsupported.
// Large batches go in several calls, as in Accumulate.
func (p *subprocess) Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	var out []int
	for _, r := range split(len(reports), p.o.maxRequest, reportCost(reports)) {
		err := p.call(ctx, "Atoms", func(ctx context.Context, c *rpc.Client) error {
			idx, err := c.Atoms(ctx, eps0, set, inputs, reports[r[0]:r[1]])
			out = append(out, idx...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SampleBlanket implements sdk.BlanketSampler by the SampleBlanket RPC: a
// plugin that does not implement it fails with an error wrapping
// errors.ErrUnsupported. Many draws go in several calls, each answer
// within the request size Randomize keeps to.
func (p *subprocess) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	if n < 0 || n > sdk.MaxBlanketDraws {
		return nil, fmt.Errorf("%w: %d blanket draws, must be in [0, %d]", sdk.ErrBadInput, n, sdk.MaxBlanketDraws)
	}
	per := max(1, p.o.maxRequest/(p.desc.ReportBytes+wireOverhead))
	out := make([][]byte, 0, n)
	for lo := 0; lo == 0 || lo < n; lo += per {
		m := min(per, n-lo)
		var reports [][]byte
		err := p.call(ctx, "SampleBlanket", func(ctx context.Context, c *rpc.Client) (err error) {
			reports, err = c.SampleBlanket(ctx, eps0, m)
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, reports...)
	}
	return out, nil
}

// EstimateFloor implements sdk.FloorEstimator by the EstimateFloor RPC: a
// plugin that does not implement it fails with an error wrapping
// errors.ErrUnsupported.
func (p *subprocess) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	var e *sdk.Estimate
	err := p.call(ctx, "EstimateFloor", func(ctx context.Context, c *rpc.Client) (err error) {
		e, err = c.EstimateFloor(ctx, stat)
		return err
	})
	return e, err
}

// Accumulate implements sdk.Randomizer.
func (p *subprocess) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	var total *sdk.Statistic
	for _, r := range split(len(reports), p.o.maxRequest, reportCost(reports)) {
		var s *sdk.Statistic
		err := p.call(ctx, "Accumulate", func(ctx context.Context, c *rpc.Client) (err error) {
			s, err = c.Accumulate(ctx, eps0, reports[r[0]:r[1]])
			return err
		})
		if err != nil {
			return nil, err
		}
		if total == nil {
			total = s
		} else if err := total.Merge(s); err != nil {
			return nil, fmt.Errorf("%w: plugin %s: statistics of reports [0,%d) and [%d,%d) do not merge: %v", sdk.ErrPluginFailed, p.name, r[0], r[0], r[1], err)
		}
	}
	return total, nil
}

// Estimate implements sdk.Randomizer.
func (p *subprocess) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	var e *sdk.Estimate
	err := p.call(ctx, "Estimate", func(ctx context.Context, c *rpc.Client) (err error) {
		e, err = c.Estimate(ctx, stat)
		return err
	})
	return e, err
}
