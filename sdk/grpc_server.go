package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	randomizerv1 "github.com/blanket-dp/blanket/sdk/proto/blanket/randomizer/v1"
)

// GRPCServer serves a Randomizer as the gRPC service
// blanket.randomizer.v1.Randomizer. Configure builds the randomizer with the
// Factory; the other RPCs call it. Errors become gRPC statuses naming their
// sentinel (see ErrorDomain), and a panic in the randomizer becomes
// codes.Internal instead of killing the process. It is safe for concurrent
// use when the randomizer is.
type GRPCServer struct {
	randomizerv1.UnimplementedRandomizerServer

	factory Factory
	logger  hclog.Logger
	r       atomic.Pointer[served]
}

type served struct{ r Randomizer }

var _ randomizerv1.RandomizerServer = (*GRPCServer)(nil)

// NewGRPCServer returns a server that builds its randomizer with f. It logs
// recovered panics to hclog.Default(), which go-plugin's Serve points at the
// plugin's logger.
func NewGRPCServer(f Factory) *GRPCServer {
	return &GRPCServer{factory: f, logger: hclog.Default()}
}

func (s *GRPCServer) randomizer() (Randomizer, error) {
	c := s.r.Load()
	if c == nil {
		return nil, toStatus(fmt.Errorf("%w: call Configure first", ErrNotConfigured))
	}
	return c.r, nil
}

// recoverPanic turns a panic in a handler into a codes.Internal status.
func (s *GRPCServer) recoverPanic(method string, err *error) {
	if p := recover(); p != nil {
		s.logger.Error("randomizer panicked", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "sdk: plugin panicked in %s: %v", method, p)
	}
}

func internal(method, what string) error {
	return status.Errorf(codes.Internal, "sdk: plugin's %s returned %s", method, what)
}

// Configure implements randomizerv1.RandomizerServer.
func (s *GRPCServer) Configure(ctx context.Context, req *randomizerv1.ConfigureRequest) (_ *randomizerv1.ConfigureResponse, err error) {
	defer s.recoverPanic("Configure", &err)
	r, err := s.factory(configFromProto(req.GetConfig()))
	if err != nil {
		return nil, toStatus(err)
	}
	if r == nil {
		return nil, internal("factory", "a nil randomizer")
	}
	d, err := r.Describe(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if d == nil {
		return nil, internal("Describe", "a nil description")
	}
	s.r.Store(&served{r})
	return &randomizerv1.ConfigureResponse{Description: descriptionToProto(d)}, nil
}

// Describe implements randomizerv1.RandomizerServer.
func (s *GRPCServer) Describe(ctx context.Context, _ *randomizerv1.DescribeRequest) (_ *randomizerv1.DescribeResponse, err error) {
	defer s.recoverPanic("Describe", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	d, err := r.Describe(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if d == nil {
		return nil, internal("Describe", "a nil description")
	}
	return &randomizerv1.DescribeResponse{Description: descriptionToProto(d)}, nil
}

// Declare implements randomizerv1.RandomizerServer. The declaration travels
// as its JSON encoding.
func (s *GRPCServer) Declare(ctx context.Context, req *randomizerv1.DeclareRequest) (_ *randomizerv1.DeclareResponse, err error) {
	defer s.recoverPanic("Declare", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	d, err := r.Declare(ctx, req.GetEps0())
	if err != nil {
		return nil, toStatus(err)
	}
	if d == nil {
		return nil, internal("Declare", "a nil declaration")
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sdk: encoding the declaration: %v", err)
	}
	return &randomizerv1.DeclareResponse{DeclarationJson: b}, nil
}

// Randomize implements randomizerv1.RandomizerServer.
func (s *GRPCServer) Randomize(ctx context.Context, req *randomizerv1.RandomizeRequest) (_ *randomizerv1.RandomizeResponse, err error) {
	defer s.recoverPanic("Randomize", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	in, err := decodeInputs(req.GetInputs())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "sdk: malformed Randomize request: %v", err)
	}
	reports, err := r.Randomize(ctx, req.GetEps0(), in)
	if err != nil {
		return nil, toStatus(err)
	}
	packed, err := packReports(reports)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sdk: plugin's Randomize: %v", err)
	}
	return &randomizerv1.RandomizeResponse{Reports: packed}, nil
}

// Accumulate implements randomizerv1.RandomizerServer.
func (s *GRPCServer) Accumulate(ctx context.Context, req *randomizerv1.AccumulateRequest) (_ *randomizerv1.AccumulateResponse, err error) {
	defer s.recoverPanic("Accumulate", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	reports, err := unpackReports(req.GetReports())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "sdk: malformed Accumulate request: %v", err)
	}
	st, err := r.Accumulate(ctx, req.GetEps0(), reports)
	if err != nil {
		return nil, toStatus(err)
	}
	if st == nil {
		return nil, internal("Accumulate", "a nil statistic")
	}
	return &randomizerv1.AccumulateResponse{Statistic: statisticToProto(st)}, nil
}

// Estimate implements randomizerv1.RandomizerServer.
func (s *GRPCServer) Estimate(ctx context.Context, req *randomizerv1.EstimateRequest) (_ *randomizerv1.EstimateResponse, err error) {
	defer s.recoverPanic("Estimate", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	e, err := r.Estimate(ctx, statisticFromProto(req.GetStatistic()))
	if err != nil {
		return nil, toStatus(err)
	}
	if e == nil {
		return nil, internal("Estimate", "a nil estimate")
	}
	return &randomizerv1.EstimateResponse{Estimate: estimateToProto(e)}, nil
}
