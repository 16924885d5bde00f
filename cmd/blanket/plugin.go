package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/blanket-dp/blanket/internal/mechspec"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

func newPluginCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "List and verify randomizer plugins",
		Long: `Randomizer plugins are either built in (` + strings.Join(builtinNames(), ", ") + `)
or binaries named blanket-<name> in the plugin directory (--plugin-dir or
$` + plugin.PluginDirEnv + `). Every plugin name is also a --mech name of
'blanket account', e.g. --mech rappor:d=64 or --mech olh:d=100.`,
	}
	cmd.AddCommand(newPluginListCmd(e), newPluginVerifyCmd(e))
	return cmd
}

func newPluginListCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the built-in plugins and the plugin binaries found",
		RunE: runE(func(cmd *cobra.Command) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "name\tkind\tpath")
			for _, n := range builtinNames() {
				fmt.Fprintf(w, "%s\tbuilt-in\t-\n", n)
			}
			bins, err := mechspec.PluginBinaries(e.pluginDir)
			if err != nil {
				return err
			}
			for _, n := range bins {
				fmt.Fprintf(w, "%s\tbinary\t%s\n", n, filepath.Join(e.pluginDir, plugin.BinaryPrefix+n))
			}
			return w.Flush()
		}),
	}
}

// builtinNames returns the names of the built-in plugins, sorted.
func builtinNames() []string {
	var names []string
	for n := range builtin.Factories() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

type verifyFlags struct {
	categories  int
	labels      []string
	lo, hi      float64
	params      []string
	eps0s       []float64
	samples     int
	falseFail   float64
	seed        uint64
	batches     int
	batchSize   int
	json        bool
	strict      bool
	checksumHex string
}

func newPluginVerifyCmd(e *env) *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "verify PATH|NAME",
		Short: "Run the conformance kit on a plugin binary (or a built-in)",
		Long: `verify loads a plugin binary (PATH, named blanket-<name>) or a built-in (NAME)
with a small configuration and runs the conformance kit (sdk/plugintest): it
validates the declaration, checks every exact likelihood ratio against eps0,
tests the plugin's own sampler against its declared output distribution
(chi-square), checks that the estimator is unbiased and its variance honest,
and feeds malformed inputs and reports. The whole run fails a correct plugin
with probability at most --false-failure-rate.

It also audits privacy empirically: from the samples it computes a lower
bound on the plugin's local eps (a distinguishing attack with Clopper-Pearson
bounds) and fails when the bound exceeds the declared eps0.

A plugin that draws from its blanket distribution (sdk.BlanketSampler, the
SampleBlanket RPC: the reports a shuffler adds to every batch for a
privacy floor) has its draws tested against the blanket of its declaration
(chi-square), and must take the draws out of its estimates
(sdk.FloorEstimator, the EstimateFloor RPC), which the floor check tests
as the estimator check does, with draws added to every batch, after its
contract (without draws it is Estimate; Estimate refuses a statistic with
draws, EstimateFloor draws below 0 or from N up); one that does not draw has
both checks skipped with a message, and the floor is unavailable for it.

Run it on the configuration you ship (--categories 1000) and on a small one
(the default: 8 categories, or the range [0, 1], or two states for a plugin
that takes only two), where the plugin declares a full matrix and its
sampler is checked exactly. At a large configuration a plugin that declares
atoms has its sampler checked through sdk.AtomMapper (the Atoms RPC); one
that does not is unchecked there, which the last line says ("PASS, SAMPLER
UNCHECKED") and --strict fails.

A stateful plugin (a tree protocol such as longitudinal) is driven through
Step over whole trees; its whole-transcript level and its sampler are
checked exactly only on a small tree (at most 8 periods), e.g.
  blanket plugin verify longitudinal --param tree=8 --param changes=2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runE(func(cmd *cobra.Command) error { return runVerify(cmd, e, f, args[0]) })(cmd, args)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.categories, "categories", 8, "number of categories for a categorical plugin (labels 0..N-1)")
	fl.StringSliceVar(&f.labels, "labels", nil, "explicit category labels (overrides --categories)")
	fl.Float64Var(&f.lo, "lo", 0, "range low end for a real-valued plugin")
	fl.Float64Var(&f.hi, "hi", 1, "range high end for a real-valued plugin")
	fl.StringArrayVar(&f.params, "param", nil, "plugin parameter key=value (repeatable)")
	fl.Float64SliceVar(&f.eps0s, "eps0", nil, "local budgets to test (default 0.5,2,5 within the plugin's range)")
	fl.IntVar(&f.samples, "samples", 0, "samples per input for the frequency test, and blanket draws per eps0 (default 20000)")
	fl.Float64Var(&f.falseFail, "false-failure-rate", 0, "probability that a correct plugin fails the run (default 1e-6)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the kit's own random choices (random report bytes, the order of inputs); the plugin's randomness is its own")
	fl.IntVar(&f.batches, "batches", 0, fmt.Sprintf("repetitions of the estimator check (default %d, at least 20)", plugintest.DefaultBatches))
	fl.IntVar(&f.batchSize, "batch-size", 0, fmt.Sprintf("inputs per batch of the estimator check (default %d)", plugintest.DefaultBatchSize))
	fl.BoolVar(&f.json, "json", false, "print the report as JSON")
	fl.BoolVar(&f.strict, "strict", false, "fail when the sampler goes unchecked at some eps0 (an atoms declaration without sdk.AtomMapper, reports the kit cannot read)")
	fl.StringVar(&f.checksumHex, "sha256", "", "expected SHA-256 of the binary (hex); refuse to run it otherwise")
	return cmd
}

func runVerify(cmd *cobra.Command, e *env, f verifyFlags, target string) error {
	ctx := cmd.Context()
	cfg := sdk.Config{Params: map[string]string{}}
	rangeGiven := cmd.Flags().Changed("lo") || cmd.Flags().Changed("hi")
	if rangeGiven {
		cfg.Lo, cfg.Hi = f.lo, f.hi
	} else if len(f.labels) > 0 {
		cfg.Categories = f.labels
	} else {
		if f.categories < 2 || f.categories > mechspec.MaxCategories {
			return usageErrorf("--categories %d, must be in [2, %d]", f.categories, mechspec.MaxCategories)
		}
		for i := range f.categories {
			cfg.Categories = append(cfg.Categories, strconv.Itoa(i))
		}
	}
	for _, kv := range f.params {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErrorf("--param %q, must be key=value", kv)
		}
		cfg.Params[k] = v
	}
	name, dir := target, e.pluginDir
	var opts []plugin.Option
	if strings.ContainsRune(target, os.PathSeparator) || strings.HasPrefix(filepath.Base(target), plugin.BinaryPrefix) {
		base := filepath.Base(target)
		n, ok := strings.CutPrefix(base, plugin.BinaryPrefix)
		if !ok || n == "" {
			return usageErrorf("plugin binary %q must be named %s<name>", target, plugin.BinaryPrefix)
		}
		if _, err := os.Stat(target); err != nil {
			return usageErrorf("plugin binary: %v", err)
		}
		name, dir = n, filepath.Dir(target)
		// A binary path means the binary, even when a built-in has the
		// same name.
		opts = append(opts, plugin.WithBuiltins(nil))
	}
	if f.checksumHex != "" {
		sum, err := parseHex(f.checksumHex)
		if err != nil {
			return usageErrorf("--sha256: %v", err)
		}
		opts = append(opts, plugin.WithChecksum(sum))
	}
	if dir != "" {
		opts = append(opts, plugin.WithPluginDir(dir))
	}
	p, err := builtin.Open(ctx, name, cfg, opts...)
	if errors.Is(err, sdk.ErrBadConfig) && !rangeGiven && len(f.labels) == 0 {
		// Not categorical: try the default range instead, then two
		// states (a boolean plugin such as longitudinal).
		rcfg := sdk.Config{Lo: f.lo, Hi: f.hi, Params: cfg.Params}
		if p2, err2 := builtin.Open(ctx, name, rcfg, opts...); err2 == nil {
			p, err = p2, nil
		} else if !cmd.Flags().Changed("categories") {
			bcfg := sdk.Config{Categories: []string{"0", "1"}, Params: cfg.Params}
			if p3, err3 := builtin.Open(ctx, name, bcfg, opts...); err3 == nil {
				p, err = p3, nil
			} else {
				err = fmt.Errorf("%w (as categorical); as real-valued on [%g, %g]: %v; with two categories: %v", err, f.lo, f.hi, err2, err3)
			}
		} else {
			err = fmt.Errorf("%w (as categorical); as real-valued on [%g, %g]: %v", err, f.lo, f.hi, err2)
		}
	}
	if err != nil {
		return err
	}
	defer p.Close()
	if f.batches != 0 && f.batches < 20 {
		return usageErrorf("--batches %d, must be at least 20", f.batches)
	}
	if f.batchSize < 0 {
		return usageErrorf("--batch-size %d, must be positive", f.batchSize)
	}
	rep, err := plugintest.Verify(ctx, p, plugintest.Options{Eps0s: f.eps0s, Samples: f.samples, FalseFailureRate: f.falseFail,
		Seed: f.seed, Batches: f.batches, BatchSize: f.batchSize, Strict: f.strict})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprint(out, rep.String())
	}
	if !rep.Passed() {
		return &failure{fmt.Errorf("plugin %s failed the conformance kit", name)}
	}
	return nil
}

func parseHex(s string) ([]byte, error) {
	if len(s)%2 != 0 {
		return nil, fmt.Errorf("odd length %d", len(s))
	}
	b := make([]byte, len(s)/2)
	for i := range b {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("not hex at %d", 2*i)
		}
		b[i] = byte(v)
	}
	return b, nil
}
