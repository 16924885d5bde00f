//go:build !unix

package testbuild

import "errors"

// lockFile is unix only: elsewhere a shared directory (ShareEnv) fails
// the builds that would use it.
func lockFile(string) (func(), error) {
	return nil, errors.New("a shared build directory needs file locks, which this system's testbuild lacks; unset " + ShareEnv)
}
