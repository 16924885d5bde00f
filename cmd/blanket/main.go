// Command blanket is the command-line front end of the Blanket privacy
// accountant for the shuffle model of differential privacy.
//
//	blanket account eps --mech krr:k=100 --eps0 4 --n 1e6 --delta 1e-6
//	blanket account calibrate --mech krr:k=100 --eps 1 --delta 1e-6 --n 1e6
//	blanket account curve --mech krr:k=100 --eps0 4 --n 1e3:1e8 --delta 1e-6 --plot eps.svg
//
// Run blanket --help for every command and flag.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, defaultEnv())
	stop()
	os.Exit(code)
}
