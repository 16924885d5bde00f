package plugin

import "github.com/blanket-dp/blanket/sdk/host"

// PID returns the process id of p's running plugin process, or 0 (p must
// come from Open with a plugin binary).
func PID(p host.Plugin) int { return p.(*subprocess).pid() }

// WithMaxRequestBytes lowers the size at which batches are split.
func WithMaxRequestBytes(n int) Option {
	return func(o *options) { o.maxRequest = n }
}
