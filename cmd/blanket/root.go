package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/mechspec"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the computation or the output failed
	exitUsage   = 2 // a command, flag or value was invalid
)

// usageError is an invalid command line: a flag value outside its domain,
// a missing flag, a --mech that does not parse. It exits with exitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// failure is an error of a command that got valid input. It exits with
// exitFailure.
type failure struct{ err error }

func (e *failure) Error() string { return e.err.Error() }
func (e *failure) Unwrap() error { return e.err }

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, e *env) int {
	root := newRootCmd(e)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	e.closePlugins()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "blanket: %v\n", err)
	var me *mechspec.Error
	if errors.As(err, &me) {
		fmt.Fprint(stderr, caret(me))
	}
	var f *failure
	if errors.As(err, &f) {
		return exitFailure
	}
	return exitUsage
}

// caret shows where a --mech error is, when the spec is short and
// printable.
func caret(e *mechspec.Error) string {
	if len(e.Spec) > 120 || e.Pos > len(e.Spec) || !utf8.ValidString(e.Spec) {
		return ""
	}
	for _, r := range e.Spec {
		if !unicode.IsPrint(r) {
			return ""
		}
	}
	return fmt.Sprintf("  %s\n  %s^\n", e.Spec, strings.Repeat(" ", utf8.RuneCountInString(e.Spec[:e.Pos])))
}

// newRootCmd builds the command tree.
func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "blanket",
		Short: "Private telemetry in the shuffle model of differential privacy",
		Long: `Blanket collects telemetry that is randomized on the device, sealed for the
collector and shuffled in large batches, and proves the central (eps, delta)
guarantee of every batch.

  blanket account ...    bound, compare and calibrate the privacy of a randomizer
  blanket plan P.yaml    calibrate every metric's local budget eps0 to a target
  blanket serve          run the shuffler, the collector and the admission issuer on an embedded store
  blanket plugin ...     list and verify randomizer plugins`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&e.pluginDir, "plugin-dir", os.Getenv(plugin.PluginDirEnv),
		"directory of randomizer plugin binaries named blanket-<name> (default $"+plugin.PluginDirEnv+")")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		// A server command's settings from the environment and its
		// config file come first: they may name the plugin directory.
		if cmd.Flags().Lookup(configFlag) != nil {
			if err := applyConfig(cmd); err != nil {
				return err
			}
		}
		if err := e.registerPlugins(cmd.Context(), e.pluginDir); err != nil {
			return &failure{err}
		}
		accountant.UseHugePages(isOneShot(cmd))
		return nil
	}
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newAccountCmd(e), newPluginCmd(e), newVersionCmd())
	root.AddCommand(newPlanCmd(e), newServeCmd(e), newShufflerCmd(e), newCollectorCmd(e), newIssuerCmd(e))
	return root
}

// oneShot is the annotation of the commands that run one computation and
// exit (account and its subcommands, plan): the accountant may put their
// large scratch on huge pages (accountant.UseHugePages), which a
// long-running server does not want (accountant/hugepage.go).
const oneShot = "one-shot"

// isOneShot reports whether cmd or a command above it is one-shot.
func isOneShot(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations[oneShot] != "" {
			return true
		}
	}
	return false
}

// flagError turns pflag's errors into usage errors that name the flag, the
// value and the rule.
func flagError(cmd *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		return usageErrorf("--%s %v, got %q", iv.GetFlag().Name, iv.Unwrap(), iv.GetValue())
	}
	return usageErrorf("%w (see '%s --help')", err, cmd.CommandPath())
}

// runE wraps a command's work: usage errors stay usage errors, every other
// error is a failure.
func runE(f func(cmd *cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		err := f(cmd)
		var ue *usageError
		if err == nil || errors.As(err, &ue) {
			return err
		}
		if errors.Is(err, accountant.ErrInvalidArgument) {
			return &usageError{err}
		}
		return &failure{err}
	}
}

// requireFlags returns a usage error naming the first flag in names that
// was not given: on the command line, or, for a server command, in the
// environment or its config file (applyConfig marks those changed too).
func requireFlags(cmd *cobra.Command, names ...string) error {
	for _, name := range names {
		if f := cmd.Flags().Lookup(name); f != nil && !f.Changed {
			if cmd.Flags().Lookup(configFlag) != nil {
				return usageErrorf("missing required flag --%s, or %s: in the --config file (see '%s --help')", name, name, cmd.CommandPath())
			}
			return usageErrorf("missing required flag --%s (see '%s --help')", name, cmd.CommandPath())
		}
	}
	return nil
}
