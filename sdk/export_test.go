package sdk

// PID returns the process id of p's running plugin process, or 0.
func PID(p *Plugin) int { return p.pid() }

// WithMaxRequestBytes lowers the size at which batches are split.
func WithMaxRequestBytes(n int) OpenOption {
	return func(o *openOptions) { o.maxRequest = n }
}
