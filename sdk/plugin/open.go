package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/host"
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
// request or response; larger batches are split into several RPCs (split),
// so that a huge batch neither meets the message limit nor one call
// timeout.
const maxRequestBytes = 16 << 20

// Option is an optional setting of Open.
type Option func(*options)

type options struct {
	builtins     map[string]sdk.Factory
	dir          string
	dirSet       bool
	checksum     []byte
	callTimeout  time.Duration
	startTimeout time.Duration
	logger       hclog.Logger
	maxRequest   int      // bytes; maxRequestBytes except in tests
	env          []string // WithEnv: variables passed besides passEnv
}

// WithBuiltins makes Open serve the named randomizers in process, before
// looking for binaries. Defaults to none; package plugins/builtin has
// Blanket's randomizers.
func WithBuiltins(b map[string]sdk.Factory) Option {
	return func(o *options) { o.builtins = b }
}

// WithPluginDir sets the directory searched for blanket-<name> binaries.
// Defaults to $BLANKET_PLUGIN_DIR; with neither, only built-ins are found.
func WithPluginDir(dir string) Option {
	return func(o *options) { o.dir, o.dirSet = dir, true }
}

// WithChecksum pins the SHA-256 checksum of the plugin binary: the binary is
// hashed before every start (including restarts) and refused, with an error
// wrapping sdk.ErrPluginFailed and go-plugin's ErrChecksumsDoNotMatch, when
// it differs. A checksum that is not 32 bytes long (an empty one included)
// fails Open with sdk.ErrBadConfig; nil means no check. Ignored for
// built-ins. Defaults to no check.
func WithChecksum(sha256Sum []byte) Option {
	return func(o *options) { o.checksum = bytes.Clone(sha256Sum) }
}

// WithCallTimeout bounds each RPC to the plugin process. A call that
// exceeds it fails with an error wrapping sdk.ErrPluginFailed and
// context.DeadlineExceeded, and the process, presumed hung, is killed and
// restarted on the next call. Defaults to DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) { o.callTimeout = d }
}

// WithStartTimeout bounds starting the plugin process and the go-plugin
// handshake. Defaults to DefaultStartTimeout.
func WithStartTimeout(d time.Duration) Option {
	return func(o *options) { o.startTimeout = d }
}

// WithLogger receives go-plugin's logs and the plugin process's own log
// lines (hclog JSON on its stderr). Defaults to discarding them.
func WithLogger(l hclog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// Open returns the randomizer of plugin name configured with cfg: the
// built-in of that name when one was passed with WithBuiltins (in process,
// host.Builtin), else the executable blanket-<name> in the plugin
// directory, started as a hashicorp/go-plugin subprocess (gRPC only,
// protocol version 1, AutoMTLS), handshaken and configured before Open
// returns.
//
// The caller must Close the Plugin; a plugin process also exits by itself
// when its host dies. A program that may exit on a signal with plugins open
// should call CleanupPlugins from its signal handler.
//
// Errors wrap sdk.ErrBadConfig (an invalid name, option or configuration),
// sdk.ErrPluginNotFound, sdk.ErrPluginFailed, or ctx's error.
//
//	r, err := plugin.Open(ctx, "krr", sdk.Config{Categories: cats}, plugin.WithPluginDir("/usr/lib/blanket"))
//	if err != nil { ... }
//	defer r.Close()
//	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: values})
func Open(ctx context.Context, name string, cfg sdk.Config, opts ...Option) (host.Plugin, error) {
	o := options{callTimeout: DefaultCallTimeout, startTimeout: DefaultStartTimeout, maxRequest: maxRequestBytes}
	for _, opt := range opts {
		opt(&o)
	}
	if o.callTimeout <= 0 {
		return nil, fmt.Errorf("%w: call timeout %v, must be positive", sdk.ErrBadConfig, o.callTimeout)
	}
	if o.startTimeout <= 0 {
		return nil, fmt.Errorf("%w: start timeout %v, must be positive", sdk.ErrBadConfig, o.startTimeout)
	}
	if o.checksum != nil && len(o.checksum) != sha256.Size {
		return nil, fmt.Errorf("%w: checksum has %d bytes, a SHA-256 checksum has %d", sdk.ErrBadConfig, len(o.checksum), sha256.Size)
	}
	if o.logger == nil {
		o.logger = hclog.NewNullLogger()
	}
	if err := host.CheckName(name); err != nil {
		return nil, err
	}
	if _, ok := o.builtins[name]; ok {
		return host.Builtin(name, cfg, o.builtins)
	}
	path, err := findBinary(name, o)
	if err != nil {
		return nil, err
	}
	p, err := startSubprocess(ctx, name, path, cfg, o)
	if err != nil {
		return nil, err // not a nil *subprocess in a non-nil Plugin
	}
	return p, nil
}

// findBinary returns the absolute path of the plugin binary of name.
func findBinary(name string, o options) (string, error) {
	dir := o.dir
	if !o.dirSet {
		dir = os.Getenv(PluginDirEnv)
	}
	if dir == "" {
		return "", fmt.Errorf("%w: %q is not built in and no plugin directory is set (WithPluginDir or $%s)", sdk.ErrPluginNotFound, name, PluginDirEnv)
	}
	file := BinaryPrefix + name
	if runtime.GOOS == "windows" {
		file += ".exe"
	}
	path, err := filepath.Abs(filepath.Join(dir, file))
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", sdk.ErrPluginNotFound, name, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not built in and %s does not exist", sdk.ErrPluginNotFound, name, path)
	}
	if !fi.Mode().IsRegular() || (runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0) {
		return "", fmt.Errorf("%w: %s is not an executable file", sdk.ErrPluginNotFound, path)
	}
	return path, nil
}

// CleanupPlugins kills every plugin process started by Open (it calls
// go-plugin's CleanupClients). Call it once, from a signal handler or just
// before the program exits; a Plugin used afterwards starts a new process.
func CleanupPlugins() { goplugin.CleanupClients() }
