package host

import (
	"fmt"
	"regexp"

	"github.com/blanket-dp/blanket/sdk"
)

// Plugin is an opened randomizer: built in and called in process
// (Builtin), or served by a plugin process (package sdk/plugin). Both
// behave the same way to their caller: the same sentinel errors, Step,
// Outputs, Atoms, DeclareForm and SampleBlanket failing with an error wrapping errors.ErrUnsupported when the
// randomizer does not implement them, every Step answer checked
// (sdk.CheckStep), calls after Close failing with sdk.ErrClosed. A Plugin
// is safe for concurrent use.
type Plugin interface {
	sdk.Randomizer
	sdk.Stateful
	sdk.OutputMapper
	sdk.AtomMapper
	sdk.FormDeclarer
	sdk.BlanketSampler
	sdk.FloorEstimator

	// Name returns the plugin name it was opened by.
	Name() string
	// Path returns the plugin binary's absolute path, or "" for a built-in.
	Path() string
	// Running reports whether the plugin answers without starting a
	// process: a built-in not closed, or a plugin process running. It
	// never starts a process and never waits for a start in progress, so
	// a readiness probe may call it at any rate.
	Running() bool
	// Restarts returns how many plugin processes were started to replace
	// one that exited, hung past the call timeout or failed its transport:
	// 0 for a built-in.
	Restarts() int64
	// Close releases the plugin (stops its process and waits until it has
	// exited). Close is idempotent and always returns nil.
	Close() error
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// CheckName returns an error wrapping sdk.ErrBadConfig unless name is a
// valid plugin name: lower-case letters, digits, '_' and '-', starting
// with a letter or digit (it names a binary blanket-<name>).
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: plugin name %q must match %s", sdk.ErrBadConfig, name, nameRE)
	}
	return nil
}
