package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	neturl "net/url"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/blanket-dp/blanket/internal/pgdb"
)

// A server command (serve, shuffler, collector, issuer) takes its settings
// from four places, the first that has one winning:
//
//  1. the command line;
//  2. an environment variable BLANKET_<FLAG> (upper case, '-' as '_'),
//     for the flags of envFlags only;
//  3. the YAML file --config names, whose keys are the command's flag
//     names (a list for a repeatable flag);
//  4. the flag's default.
//
// Only the flags that name a secret, or where one lives, read the
// environment: systemd hands secrets to a unit as credential files
// (LoadCredential, whose directory only the command line or the
// environment can name) or an EnvironmentFile, and the config file may then
// be readable by every operator. Everything else stays in the file, where
// it is validated and reviewed: an environment is inherited silently (by
// every shell of a session, by every role started from it, by the plugin
// processes), so a stray BLANKET_ADMISSION=open or BLANKET_ADMIN_ADDR would
// weaken a guarantee or expose the operator's listener without a line in
// the file saying so. A BLANKET_<FLAG> variable of another flag of the
// command is reported at start rather than ignored silently.

// configFlag is the flag naming a server command's config file.
const configFlag = "config"

// envFlags are the flags that read the environment variable envVar(flag):
// the store URL (its password), the directories and files that hold
// secrets, and the plugin directory, which read the environment before
// config files existed.
var envFlags = []string{"store", "key-dir", "token-file", "admission-seed", "seed", "plugin-dir"}

// envVar returns the environment variable of the flag name:
// BLANKET_KEY_DIR for key-dir.
func envVar(name string) string {
	return "BLANKET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// addConfigFlag adds --config to cmd, a server command, after its other
// flags, and names the environment variable in the help of each of its
// flags that reads one.
func addConfigFlag(cmd *cobra.Command) {
	cmd.Flags().String(configFlag, "", "a YAML file of settings whose keys are this command's flag names (addr: 127.0.0.1:8080; a list for a repeatable flag): the command line wins over $BLANKET_STORE and the other secrets' variables, which win over the file, which wins over the defaults")
	for _, name := range envFlags {
		if f := cmd.Flags().Lookup(name); f != nil && !strings.Contains(f.Usage, "$"+envVar(name)) {
			f.Usage += " (default $" + envVar(name) + ")"
		}
	}
}

// applyConfig sets the flags of cmd (a command with --config) that the
// command line left unset: from the environment (envFlags), then from the
// config file. Each value goes through the flag's own Set, as on the
// command line, and marks the flag changed, so that requireFlags counts
// it. It logs its warnings (a config file others may read holding a
// password, variables that are not read) to cmd's stderr.
func applyConfig(cmd *cobra.Command) error {
	fs := cmd.Flags()
	for _, name := range envFlags {
		v := os.Getenv(envVar(name))
		if f := fs.Lookup(name); f == nil || f.Changed || v == "" {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return usageErrorf("$%s: %v", envVar(name), setCause(err))
		}
	}
	var warnings []string
	fs.VisitAll(func(f *pflag.Flag) {
		v := envVar(f.Name)
		if slices.Contains(envFlags, f.Name) || f.Name == "help" || os.Getenv(v) == "" {
			return
		}
		where := "on the command line or as " + f.Name + ": in the --config file"
		if f.Name == configFlag {
			where = "on the command line"
		}
		warnings = append(warnings, fmt.Sprintf("$%s is set but not read: only the secrets' variables are ($%s); give --%s %s", v, strings.Join(envVars(), ", $"), f.Name, where))
	})
	if path, _ := fs.GetString(configFlag); path != "" {
		w, err := loadConfig(cmd, path)
		if err != nil {
			return err
		}
		warnings = append(warnings, w...)
	}
	logWarnings(cmd, warnings)
	return nil
}

// envVars returns the variables of envFlags.
func envVars() []string {
	var vs []string
	for _, name := range envFlags {
		vs = append(vs, envVar(name))
	}
	return vs
}

// loadConfig sets the flags of cmd that are still unset from the config
// file path, and refuses anything but a mapping of cmd's flag names to
// values each flag takes. It returns its warnings.
func loadConfig(cmd *cobra.Command, path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--config: %v", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, usageErrorf("--config %s: %v", path, err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return nil, usageErrorf("--config %s: one YAML document of settings expected, found more", path)
	}
	if doc.Kind == 0 { // empty
		return nil, nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, usageErrorf("--config %s:%d: must be a mapping of %s's flag names to values (addr: 127.0.0.1:8080)", path, top.Line, cmd.CommandPath())
	}
	fs := cmd.Flags()
	seen := map[string]int{}
	password := false
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		at := fmt.Sprintf("--config %s:%d", path, k.Line)
		if k.Kind != yaml.ScalarNode {
			return nil, usageErrorf("%s: a key must be a flag name of %s", at, cmd.CommandPath())
		}
		name := k.Value
		if line, ok := seen[name]; ok {
			return nil, usageErrorf("%s: %s is set twice (also on line %d)", at, name, line)
		}
		seen[name] = k.Line
		switch name {
		case configFlag:
			return nil, usageErrorf("%s: config cannot be set in a config file: give --config on the command line", at)
		case "help", "version":
			return nil, usageErrorf("%s: %s is not a setting", at, name)
		}
		f := fs.Lookup(name)
		if f == nil {
			return nil, usageErrorf("%s: %s", at, unknownKey(cmd, name))
		}
		values, err := nodeValues(v, f)
		if err != nil {
			return nil, usageErrorf("%s: %s: %v", at, name, err)
		}
		if name == "store" && len(values) == 1 && hasPassword(values[0]) {
			password = true
		}
		if f.Changed {
			continue // the command line or the environment set it
		}
		for _, s := range values {
			if err := fs.Set(name, s); err != nil {
				return nil, usageErrorf("%s: %s %q is not a valid %s: %v", at, name, s, f.Value.Type(), setCause(err))
			}
		}
	}
	if !password || runtime.GOOS == "windows" {
		return nil, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return []string{fmt.Sprintf("--config %s has mode %04o, readable by others, and its store URL holds a password: run chmod 600 %s, or keep the password out of the file (a password file, PGPASSFILE, or $BLANKET_STORE)", path, fi.Mode().Perm(), path)}, nil
	}
	return nil, nil
}

// nodeValues returns the values a config file's node gives flag f: one
// scalar, or, for a repeatable flag, a list of scalars.
func nodeValues(v *yaml.Node, f *pflag.Flag) ([]string, error) {
	for v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	_, repeatable := f.Value.(pflag.SliceValue)
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return nil, errors.New("no value (write \"\" for an empty one)")
	case v.Kind == yaml.ScalarNode:
		return []string{v.Value}, nil
	case v.Kind == yaml.SequenceNode && repeatable:
		var out []string
		for _, item := range v.Content {
			for item.Kind == yaml.AliasNode {
				item = item.Alias
			}
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return nil, fmt.Errorf("line %d: a list of values expected", item.Line)
			}
			out = append(out, item.Value)
		}
		return out, nil
	case v.Kind == yaml.SequenceNode:
		return nil, fmt.Errorf("takes one value, not a list (--%s is not repeatable)", f.Name)
	default:
		return nil, errors.New("a value expected, not a mapping")
	}
}

// unknownKey explains why name is no key of cmd's config file: a flag of
// another server command, or none (with the nearest flag names).
func unknownKey(cmd *cobra.Command, name string) string {
	var others []string
	for _, c := range cmd.Root().Commands() {
		if c != cmd && c.Flags().Lookup(configFlag) != nil && c.Flags().Lookup(name) != nil {
			others = append(others, c.CommandPath())
		}
	}
	if len(others) > 0 {
		return fmt.Sprintf("%s is a flag of %s, not of %s", name, strings.Join(others, " and "), cmd.CommandPath())
	}
	var near []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != configFlag && f.Name != "help" && editDistance(name, f.Name) <= 2 {
			near = append(near, f.Name)
		}
	})
	msg := fmt.Sprintf("unknown key %s: %s has no flag --%s", name, cmd.CommandPath(), name)
	if len(near) > 0 {
		msg += " (did you mean " + strings.Join(near, " or ") + "?)"
	}
	return msg
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// hasPassword reports whether store is a PostgreSQL URL holding a
// password (in its user part or a password parameter).
func hasPassword(store string) bool {
	if !pgdb.IsURL(store) {
		return false
	}
	u, err := neturl.Parse(store)
	if err != nil {
		return true // cannot tell: err on the side of the warning
	}
	_, set := u.User.Password()
	return set || u.Query().Has("password")
}

// setCause returns the flag value's own error out of pflag's wrapping.
func setCause(err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		return iv.Unwrap()
	}
	return err
}

// logWarnings logs warnings to cmd's stderr, unless its --log-level is
// above warn.
func logWarnings(cmd *cobra.Command, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	level := slog.LevelInfo
	if f := cmd.Flags().Lookup("log-level"); f != nil {
		_ = level.UnmarshalText([]byte(f.Value.String()))
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	for _, w := range warnings {
		logger.Warn(w)
	}
}
