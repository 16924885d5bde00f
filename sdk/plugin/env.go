package plugin

import (
	"os"
	"slices"
	"strings"
)

// A plugin process does not inherit the host's environment. The host is
// a collector or a server whose environment carries its secrets
// (BLANKET_STORE may hold a database password, see docs/operating.md), and
// a randomizer needs none of them: its configuration comes over the
// plugin protocol (sdk.Config). It starts with the variables named in
// passEnv that the host has, those named by WithEnv, and go-plugin's own
// handshake variables (go-plugin's SkipHostEnv).

// passEnv names the variables a plugin process inherits: where to find
// programs and temporary files, the locale and time zone, the Go
// runtime's knobs, and the plugin log level.
var passEnv = []string{
	"PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL",
	"GOGC", "GOMAXPROCS", "GOMEMLIMIT", "GODEBUG", "GOTRACEBACK", "GORACE", "GOCOVERDIR",
	LogLevelEnv,
}

// WithEnv passes the named variables of the host's environment to the
// plugin processes, besides the few they always get (PATH, HOME, TMPDIR,
// TZ, the locale, the Go runtime's GO* knobs and BLANKET_PLUGIN_LOG_LEVEL).
// A plugin that reads a variable of its own needs it named here; the
// rest of the host's environment, its secrets included, stays out.
func WithEnv(names ...string) Option {
	return func(o *options) { o.env = append(o.env, names...) }
}

// pluginEnv returns the environment of a plugin process: the host's
// values of passEnv and extra, in that order, each once.
func pluginEnv(extra []string) []string {
	var env []string
	seen := make(map[string]bool, len(passEnv)+len(extra))
	for _, name := range slices.Concat(passEnv, extra) {
		if name == "" || strings.Contains(name, "=") || seen[name] {
			continue
		}
		seen[name] = true
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}
