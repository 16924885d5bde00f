// Package randomizerv1 is the generated Go code of the Blanket randomizer
// plugin protocol, version 1 (randomizer.proto beside this file). Use it
// through packages sdk/rpc (Server, Client) and sdk/plugin (Open, Serve);
// regenerate it with `make generate`.
package randomizerv1
