package plugin

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/rpc"
)

// LogLevelEnv is the environment variable that sets a plugin process's log
// level (trace, debug, info, warn, error). Defaults to info.
const LogLevelEnv = "BLANKET_PLUGIN_LOG_LEVEL"

// parentPollInterval is how often a plugin process checks that its host is
// still alive.
const parentPollInterval = time.Second

// pluginGCPercent is the garbage collector target of a plugin process
// unless $GOGC says otherwise. A plugin holds little live memory and turns
// over a few hundred kilobytes per batch, so at Go's default of 100 it
// collects every few batches, and its collector's idle workers compete for
// the cores with the host waiting on the answer: measured on two cores, a
// 4096-report Randomize round trip took a quarter less time at 400. The
// cost is a heap of about five times the live data, a few megabytes.
const pluginGCPercent = 400

// hostCores is the number of cores a plugin process leaves to its host
// unless $GOMAXPROCS says otherwise. During a call the host is not idle:
// its gRPC reader and writer goroutines and its garbage collector, whose
// idle workers take any idle core, run next to the plugin. A plugin with a
// processor per core wakes a thread for each goroutine handoff of a call
// (reader, handler, writer) and runs them against the host; measured on
// two cores, a 4096-report Randomize round trip took about a tenth less
// time with one processor than with two. Concurrent calls still use all
// the other cores. (Setting GOMAXPROCS also stops the runtime from
// following later changes of the process's CPU limit.)
const hostCores = 1

// Serve serves the randomizer built by f as a plugin and returns when the
// host shuts it down. It is all a plugin binary's main calls:
//
//	func main() { plugin.Serve(sdk.FactoryOf(krr.FromConfig)) }
//
// It serves gRPC only, protocol version 1 (see PluginSets), with message
// limits raised to rpc.MaxMessageBytes. It logs hclog JSON to stderr, which the
// host reads as log lines; stdout belongs to the go-plugin handshake, so
// nothing may print to it before Serve. It exits the process when the host
// dies (the parent process id changes), so that a killed host leaves no
// orphans. It sets the garbage collector's target to 400 percent unless
// $GOGC is set (see pluginGCPercent), and leaves a core to the host
// (GOMAXPROCS one less than the default, at least 1) unless $GOMAXPROCS
// is set (see hostCores). Run by hand, without the host's handshake, it
// prints an explanation and exits with status 1.
func Serve(f sdk.Factory) {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(pluginGCPercent)
	}
	if _, ok := os.LookupEnv("GOMAXPROCS"); !ok {
		runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)-hostCores))
	}
	level := hclog.LevelFromString(os.Getenv(LogLevelEnv))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       filepath.Base(os.Args[0]),
		Level:      level,
		Output:     os.Stderr,
		JSONFormat: true,
	})
	hclog.SetDefault(logger)
	go watchParent(os.Getppid(), parentPollInterval, func() {
		logger.Warn("host process is gone, exiting")
		os.Exit(1)
	})
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: PluginSets(f),
		GRPCServer:       newServer,
		Logger:           logger,
	})
}

// newServer is the plugin's gRPC server factory: go-plugin's default plus
// serverOptions.
func newServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts, rpc.ServerOptions()...)...)
}

// watchParent calls gone once the parent process id is no longer ppid: the
// parent died and the process was re-parented (to init or a subreaper).
func watchParent(ppid int, every time.Duration, gone func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		if os.Getppid() != ppid {
			gone()
			return
		}
	}
}
