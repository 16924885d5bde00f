package rpc

import (
	"context"
	"errors"
	"fmt"
	"math"

	"google.golang.org/grpc"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	randomizerv1 "github.com/blanket-dp/blanket/sdk/proto/blanket/randomizer/v1"
)

// Client is an sdk.Randomizer served by a plugin process, called over one
// gRPC connection: Configure first, then the sdk.Randomizer methods. Errors are
// *PluginError values that unwrap to the sentinel the plugin returned. It
// has no timeouts and no restarts; plugin.Open wraps it with both. It is safe for
// concurrent use.
type Client struct {
	rpc randomizerv1.RandomizerClient
}

var (
	_ sdk.Randomizer     = (*Client)(nil)
	_ sdk.Stateful       = (*Client)(nil)
	_ sdk.BlanketSampler = (*Client)(nil)
	_ sdk.FloorEstimator = (*Client)(nil)
)

// NewClient returns a client on conn.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: randomizerv1.NewRandomizerClient(conn)}
}

// Configure makes the plugin process serve the randomizer of cfg, replacing
// any earlier one, and returns its description. Errors wrap sdk.ErrBadConfig.
func (c *Client) Configure(ctx context.Context, cfg sdk.Config) (*sdk.Description, error) {
	if err := checkUTF8(cfg); err != nil {
		return nil, err
	}
	resp, err := c.rpc.Configure(ctx, &randomizerv1.ConfigureRequest{Config: configToProto(cfg)}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	if resp.GetDescription() == nil {
		return nil, fmt.Errorf("%w: Configure answered without a description", sdk.ErrPluginFailed)
	}
	return descriptionFromProto(resp.GetDescription()), nil
}

// Describe implements sdk.Randomizer.
func (c *Client) Describe(ctx context.Context) (*sdk.Description, error) {
	resp, err := c.rpc.Describe(ctx, &randomizerv1.DescribeRequest{}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	if resp.GetDescription() == nil {
		return nil, fmt.Errorf("%w: Describe answered without a description", sdk.ErrPluginFailed)
	}
	return descriptionFromProto(resp.GetDescription()), nil
}

// Declare implements sdk.Randomizer. The declaration is decoded with
// declare.DecodeDeclaration but not validated.
func (c *Client) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	resp, err := c.rpc.Declare(ctx, &randomizerv1.DeclareRequest{Eps0: eps0}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	d, err := declare.DecodeDeclaration(resp.GetDeclarationJson())
	if err != nil {
		return nil, fmt.Errorf("%w: Declare answered with an undecodable declaration: %w", sdk.ErrPluginFailed, err)
	}
	return d, nil
}

// DeclareForm implements sdk.FormDeclarer. A plugin that does not
// implement it answers UNIMPLEMENTED (an error wrapping
// errors.ErrUnsupported), or, when built before forms were part of the
// protocol, its default form: that answer fails with an error wrapping
// errors.ErrUnsupported too.
func (c *Client) DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error) {
	resp, err := c.rpc.Declare(ctx, &randomizerv1.DeclareRequest{Eps0: eps0, Form: string(form)}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	d, err := declare.DecodeDeclaration(resp.GetDeclarationJson())
	if err != nil {
		return nil, fmt.Errorf("%w: Declare answered with an undecodable declaration: %w", sdk.ErrPluginFailed, err)
	}
	if d.Form != form {
		return nil, fmt.Errorf("plugin answered a %s declaration when asked for the %s form: %w", d.Form, form, errors.ErrUnsupported)
	}
	return d, nil
}

// Randomize implements sdk.Randomizer.
func (c *Client) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	resp, err := c.rpc.Randomize(ctx, &randomizerv1.RandomizeRequest{Eps0: eps0, Inputs: encodeInputs(in)}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	reports, err := unpackReports(resp.GetReports())
	if err != nil {
		return nil, fmt.Errorf("%w: Randomize answered malformed reports: %v", sdk.ErrPluginFailed, err)
	}
	if got, want := len(reports), in.Len(); got != want {
		return nil, fmt.Errorf("%w: Randomize answered %d reports for %d inputs", sdk.ErrPluginFailed, got, want)
	}
	return reports, nil
}

// Accumulate implements sdk.Randomizer.
func (c *Client) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	packed, err := packReports(reports)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sdk.ErrBadReport, err)
	}
	resp, err := c.rpc.Accumulate(ctx, &randomizerv1.AccumulateRequest{Eps0: eps0, Reports: packed}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	if resp.GetStatistic() == nil {
		return nil, fmt.Errorf("%w: Accumulate answered without a statistic", sdk.ErrPluginFailed)
	}
	return statisticFromProto(resp.GetStatistic()), nil
}

// Outputs implements sdk.OutputMapper. A plugin that does not implement it
// answers UNIMPLEMENTED: the error wraps errors.ErrUnsupported.
func (c *Client) Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error) {
	packed, err := packReports(reports)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sdk.ErrBadReport, err)
	}
	resp, err := c.rpc.Outputs(ctx, &randomizerv1.OutputsRequest{Eps0: eps0, Reports: packed}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	outs := resp.GetOutputs()
	if len(outs) != len(reports) {
		return nil, fmt.Errorf("%w: Outputs answered %d outputs for %d reports", sdk.ErrPluginFailed, len(outs), len(reports))
	}
	idx := make([]int, len(outs))
	for i, o := range outs {
		idx[i] = int(o)
	}
	return idx, nil
}

// Atoms implements sdk.AtomMapper. A plugin that does not implement it
// answers UNIMPLEMENTED: the error wraps errors.ErrUnsupported.
func (c *Client) Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error) {
	if set < 0 || int64(set) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: declared set %d", sdk.ErrBadInput, set)
	}
	packed, err := packReports(reports)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sdk.ErrBadReport, err)
	}
	resp, err := c.rpc.Atoms(ctx, &randomizerv1.AtomsRequest{Eps0: eps0, Set: uint32(set), Inputs: inputs, Reports: packed}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	atoms := resp.GetAtoms()
	if len(atoms) != len(reports) {
		return nil, fmt.Errorf("%w: Atoms answered %d atoms for %d reports", sdk.ErrPluginFailed, len(atoms), len(reports))
	}
	idx := make([]int, len(atoms))
	for i, a := range atoms {
		idx[i] = int(a)
	}
	return idx, nil
}

// SampleBlanket implements sdk.BlanketSampler. A plugin that does not
// implement it answers UNIMPLEMENTED: the error wraps
// errors.ErrUnsupported. A negative n, or one above sdk.MaxBlanketDraws,
// fails with sdk.ErrBadInput before the call; an answer with another
// number of reports with sdk.ErrPluginFailed.
func (c *Client) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	if n < 0 || n > sdk.MaxBlanketDraws {
		return nil, fmt.Errorf("%w: %d blanket draws, must be in [0, %d]", sdk.ErrBadInput, n, sdk.MaxBlanketDraws)
	}
	resp, err := c.rpc.SampleBlanket(ctx, &randomizerv1.SampleBlanketRequest{Eps0: eps0, Count: uint32(n)}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	reports, err := unpackReports(resp.GetReports())
	if err != nil {
		return nil, fmt.Errorf("%w: SampleBlanket answered malformed reports: %v", sdk.ErrPluginFailed, err)
	}
	if len(reports) != n {
		return nil, fmt.Errorf("%w: SampleBlanket answered %d reports for %d draws", sdk.ErrPluginFailed, len(reports), n)
	}
	return reports, nil
}

// EstimateFloor implements sdk.FloorEstimator. A plugin that does not
// implement it answers UNIMPLEMENTED: the error wraps
// errors.ErrUnsupported.
func (c *Client) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	resp, err := c.rpc.EstimateFloor(ctx, &randomizerv1.EstimateRequest{Statistic: statisticToProto(stat)}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	if resp.GetEstimate() == nil {
		return nil, fmt.Errorf("%w: EstimateFloor answered without an estimate", sdk.ErrPluginFailed)
	}
	return estimateFromProto(resp.GetEstimate()), nil
}

// Step implements sdk.Stateful. A plugin whose randomizer is not stateful
// answers UNIMPLEMENTED: the error wraps errors.ErrUnsupported. The answer
// is checked (one report and one non-empty state per input) and fails
// with sdk.ErrPluginFailed otherwise; an empty report is returned as nil (no
// report this period).
func (c *Client) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) (reports, next [][]byte, err error) {
	req := &randomizerv1.StepRequest{Eps0: eps0, Period: period, States: states, Inputs: encodeInputs(in)}
	resp, err := c.rpc.Step(ctx, req, callOptions...)
	if err != nil {
		return nil, nil, fromStatus(err)
	}
	reports, err = unpackReports(resp.GetReports())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: Step answered malformed reports: %v", sdk.ErrPluginFailed, err)
	}
	next = resp.GetStates()
	if err := sdk.CheckStep(in.Len(), reports, next); err != nil {
		return nil, nil, err
	}
	return reports, next, nil
}

// Estimate implements sdk.Randomizer.
func (c *Client) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	resp, err := c.rpc.Estimate(ctx, &randomizerv1.EstimateRequest{Statistic: statisticToProto(stat)}, callOptions...)
	if err != nil {
		return nil, fromStatus(err)
	}
	if resp.GetEstimate() == nil {
		return nil, fmt.Errorf("%w: sdk.Estimate answered without an estimate", sdk.ErrPluginFailed)
	}
	return estimateFromProto(resp.GetEstimate()), nil
}
