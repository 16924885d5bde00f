package plugin_test

import (
	"context"
	"testing"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

const benchBatch = 4096

var (
	sinkReports [][]byte
	sinkStat    *sdk.Statistic
)

// benchModes are the ways a benchmark reaches a randomizer: in process
// (a built-in), over gRPC to a server in the same process
// (goplugin.TestPluginGRPCConn: serialization without a process boundary),
// and through a plugin binary (plugin.Open with a plugin directory).
var benchModes = []string{"in-process", "grpc-loopback", "subprocess"}

func openBench(b *testing.B, pc pluginCase, mode string) sdk.Randomizer {
	b.Helper()
	ctx := context.Background()
	switch mode {
	case "in-process":
		p, err := builtin.Open(ctx, pc.name, pc.cfg)
		if err != nil {
			b.Fatal(err)
		}
		return p
	case "grpc-loopback":
		c := grpcClient(b, builtin.Factories()[pc.name])
		if _, err := c.Configure(ctx, pc.cfg); err != nil {
			b.Fatal(err)
		}
		return c
	default:
		p, err := plugin.Open(ctx, pc.name, pc.cfg, plugin.WithPluginDir(buildPlugin(b, pc.name)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close() })
		return p
	}
}

// BenchmarkRandomize measures batches of 4096 reports at eps0 = 2 with
// crypto randomness, per plugin and mode.
func BenchmarkRandomize(b *testing.B) {
	ctx := context.Background()
	for _, pc := range pluginCases() {
		for _, mode := range benchModes {
			b.Run(pc.name+"/"+mode, func(b *testing.B) {
				r := openBench(b, pc, mode)
				in := pc.inputs(benchBatch)
				var err error
				for b.Loop() {
					if sinkReports, err = r.Randomize(ctx, 2, in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "reports/s")
			})
		}
	}
}

// BenchmarkAccumulate measures accumulating batches of 4096 reports.
func BenchmarkAccumulate(b *testing.B) {
	ctx := context.Background()
	for _, pc := range pluginCases() {
		for _, mode := range benchModes {
			b.Run(pc.name+"/"+mode, func(b *testing.B) {
				r := openBench(b, pc, mode)
				reports, err := r.Randomize(ctx, 2, pc.inputs(benchBatch))
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if sinkStat, err = r.Accumulate(ctx, 2, reports); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "reports/s")
			})
		}
	}
}

// BenchmarkDescribe measures the fixed cost of one small RPC.
func BenchmarkDescribe(b *testing.B) {
	ctx := context.Background()
	pc := pluginCases()[0]
	for _, mode := range benchModes {
		b.Run(pc.name+"/"+mode, func(b *testing.B) {
			r := openBench(b, pc, mode)
			for b.Loop() {
				if _, err := r.Describe(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
