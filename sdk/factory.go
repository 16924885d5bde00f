package sdk

// Factory builds a configured Randomizer from a plugin-independent
// configuration. Errors should wrap ErrBadConfig.
type Factory func(Config) (Randomizer, error)

// FactoryOf adapts a plugin package's typed constructor, such as
// krr.FromConfig, to a Factory:
//
//	plugin.Serve(sdk.FactoryOf(krr.FromConfig))
func FactoryOf[R Randomizer](f func(Config) (R, error)) Factory {
	return func(cfg Config) (Randomizer, error) {
		r, err := f(cfg)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}
