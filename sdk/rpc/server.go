package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime/debug"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	randomizerv1 "github.com/blanket-dp/blanket/sdk/proto/blanket/randomizer/v1"
)

// Server serves an sdk.Randomizer as the gRPC service
// blanket.randomizer.v1.Randomizer. Configure builds the randomizer with the
// sdk.Factory; the other RPCs call it. Errors become gRPC statuses naming their
// sentinel (see ErrorDomain), and a panic in the randomizer becomes
// codes.Internal instead of killing the process. It is safe for concurrent
// use when the randomizer is.
type Server struct {
	randomizerv1.UnimplementedRandomizerServer

	factory sdk.Factory
	logger  hclog.Logger
	r       atomic.Pointer[served]
}

type served struct {
	r           sdk.Randomizer
	reportBytes int // of r's description
}

var _ randomizerv1.RandomizerServer = (*Server)(nil)

// NewServer returns a server that builds its randomizer with f. It logs
// recovered panics to hclog.Default(), which go-plugin's Serve points at the
// plugin's logger.
func NewServer(f sdk.Factory) *Server {
	return &Server{factory: f, logger: hclog.Default()}
}

func (s *Server) randomizer() (sdk.Randomizer, error) {
	c, err := s.load()
	if err != nil {
		return nil, err
	}
	return c.r, nil
}

func (s *Server) load() (*served, error) {
	c := s.r.Load()
	if c == nil {
		return nil, toStatus(fmt.Errorf("%w: call Configure first", sdk.ErrNotConfigured))
	}
	return c, nil
}

// recoverPanic turns a panic in a handler into a codes.Internal status.
func (s *Server) recoverPanic(method string, err *error) {
	if p := recover(); p != nil {
		s.logger.Error("randomizer panicked", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "sdk: plugin panicked in %s: %v", method, p)
	}
}

func internal(method, what string) error {
	return status.Errorf(codes.Internal, "sdk: plugin's %s returned %s", method, what)
}

// Configure implements randomizerv1.RandomizerServer.
func (s *Server) Configure(ctx context.Context, req *randomizerv1.ConfigureRequest) (_ *randomizerv1.ConfigureResponse, err error) {
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
	s.r.Store(&served{r: r, reportBytes: d.ReportBytes})
	return &randomizerv1.ConfigureResponse{Description: descriptionToProto(d)}, nil
}

// Describe implements randomizerv1.RandomizerServer.
func (s *Server) Describe(ctx context.Context, _ *randomizerv1.DescribeRequest) (_ *randomizerv1.DescribeResponse, err error) {
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
func (s *Server) Declare(ctx context.Context, req *randomizerv1.DeclareRequest) (_ *randomizerv1.DeclareResponse, err error) {
	defer s.recoverPanic("Declare", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	var d *declare.Declaration
	if form := req.GetForm(); form != "" {
		fd, ok := r.(sdk.FormDeclarer)
		if !ok {
			return nil, status.Error(codes.Unimplemented, "sdk: this plugin declares one form only (it does not implement sdk.FormDeclarer)")
		}
		d, err = fd.DeclareForm(ctx, req.GetEps0(), declare.Form(form))
	} else {
		d, err = r.Declare(ctx, req.GetEps0())
	}
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

// Randomize implements randomizerv1.RandomizerServer. It calls
// RandomizePacked when the randomizer is an sdk.PackedRandomizer with a positive
// ReportBytes, else Randomize. A request that is not a valid batch fails
// with sdk.ErrBadInput.
func (s *Server) Randomize(ctx context.Context, req *randomizerv1.RandomizeRequest) (_ *randomizerv1.RandomizeResponse, err error) {
	defer s.recoverPanic("Randomize", &err)
	c, err := s.load()
	if err != nil {
		return nil, err
	}
	if pr, ok := c.r.(sdk.PackedRandomizer); ok && c.reportBytes > 0 {
		return s.randomizePacked(ctx, pr, c.reportBytes, req)
	}
	in, err := decodeInputs(req.GetInputs())
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: malformed Randomize request: %v", sdk.ErrBadInput, err))
	}
	reports, err := c.r.Randomize(ctx, req.GetEps0(), in)
	if err != nil {
		return nil, toStatus(err)
	}
	packed, err := packReports(reports)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sdk: plugin's Randomize: %v", err)
	}
	return &randomizerv1.RandomizeResponse{Reports: packed}, nil
}

func (s *Server) randomizePacked(ctx context.Context, r sdk.PackedRandomizer, size int, req *randomizerv1.RandomizeRequest) (*randomizerv1.RandomizeResponse, error) {
	in, err := packedInputs(req.GetInputs())
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: malformed Randomize request: %v", sdk.ErrBadInput, err))
	}
	data, err := r.RandomizePacked(ctx, req.GetEps0(), in)
	if err != nil {
		return nil, toStatus(err)
	}
	n := in.Len()
	if uint64(n)*uint64(size) != uint64(len(data)) || uint64(len(data)) > math.MaxUint32 {
		return nil, internal("RandomizePacked", fmt.Sprintf("%d bytes for %d reports of %d bytes", len(data), n, size))
	}
	p := &randomizerv1.Reports{Data: data}
	if n > 0 {
		p.Size, p.Count = uint32(size), uint32(n)
	}
	return &randomizerv1.RandomizeResponse{Reports: p}, nil
}

// Accumulate implements randomizerv1.RandomizerServer.
func (s *Server) Accumulate(ctx context.Context, req *randomizerv1.AccumulateRequest) (_ *randomizerv1.AccumulateResponse, err error) {
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

// Outputs implements randomizerv1.RandomizerServer: UNIMPLEMENTED unless
// the randomizer is an sdk.OutputMapper.
func (s *Server) Outputs(ctx context.Context, req *randomizerv1.OutputsRequest) (_ *randomizerv1.OutputsResponse, err error) {
	defer s.recoverPanic("Outputs", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	om, ok := r.(sdk.OutputMapper)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "sdk: this plugin's reports are output indices in the SDK's index encoding")
	}
	reports, err := unpackReports(req.GetReports())
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: malformed Outputs request: %v", sdk.ErrBadReport, err))
	}
	idx, err := om.Outputs(ctx, req.GetEps0(), reports)
	if err != nil {
		return nil, toStatus(err)
	}
	if len(idx) != len(reports) {
		return nil, internal("Outputs", fmt.Sprintf("%d outputs for %d reports", len(idx), len(reports)))
	}
	outs := make([]uint32, len(idx))
	for i, o := range idx {
		if o < 0 || int64(o) > math.MaxUint32 {
			return nil, internal("Outputs", fmt.Sprintf("output %d of report %d", o, i))
		}
		outs[i] = uint32(o)
	}
	return &randomizerv1.OutputsResponse{Outputs: outs}, nil
}

// Step implements randomizerv1.RandomizerServer: UNIMPLEMENTED unless the
// randomizer is sdk.Stateful. An empty state in the request is a user's first
// step (nil to the randomizer), and a nil report in the answer travels as
// an empty one. The answer goes back as the randomizer gave it: the host
// checks its shape.
func (s *Server) Step(ctx context.Context, req *randomizerv1.StepRequest) (_ *randomizerv1.StepResponse, err error) {
	defer s.recoverPanic("Step", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	st, ok := r.(sdk.Stateful)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "sdk: this plugin's randomizer is not stateful")
	}
	in, err := decodeInputs(req.GetInputs())
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: malformed Step request: %v", sdk.ErrBadInput, err))
	}
	states := req.GetStates()
	if len(states) != in.Len() {
		return nil, toStatus(fmt.Errorf("%w: malformed Step request: %d states for %d inputs", sdk.ErrBadInput, len(states), in.Len()))
	}
	for i, b := range states {
		if len(b) == 0 {
			states[i] = nil
		}
	}
	reports, next, err := st.Step(ctx, req.GetEps0(), req.GetPeriod(), states, in)
	if err != nil {
		return nil, toStatus(err)
	}
	packed, err := packReports(reports)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sdk: plugin's Step: %v", err)
	}
	return &randomizerv1.StepResponse{Reports: packed, States: next}, nil
}

// Estimate implements randomizerv1.RandomizerServer.
func (s *Server) Estimate(ctx context.Context, req *randomizerv1.EstimateRequest) (_ *randomizerv1.EstimateResponse, err error) {
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

// EstimateFloor implements randomizerv1.RandomizerServer: UNIMPLEMENTED
// unless the randomizer is an sdk.FloorEstimator.
func (s *Server) EstimateFloor(ctx context.Context, req *randomizerv1.EstimateRequest) (_ *randomizerv1.EstimateResponse, err error) {
	defer s.recoverPanic("EstimateFloor", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	fe, ok := r.(sdk.FloorEstimator)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "sdk: this plugin does not take blanket draws out of its estimates (sdk.FloorEstimator)")
	}
	e, err := fe.EstimateFloor(ctx, statisticFromProto(req.GetStatistic()))
	if err != nil {
		return nil, toStatus(err)
	}
	if e == nil {
		return nil, internal("EstimateFloor", "a nil estimate")
	}
	return &randomizerv1.EstimateResponse{Estimate: estimateToProto(e)}, nil
}

// Atoms implements randomizerv1.RandomizerServer: UNIMPLEMENTED unless
// the randomizer is an sdk.AtomMapper.
func (s *Server) Atoms(ctx context.Context, req *randomizerv1.AtomsRequest) (_ *randomizerv1.AtomsResponse, err error) {
	defer s.recoverPanic("Atoms", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	am, ok := r.(sdk.AtomMapper)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "sdk: this plugin does not map reports to declared atoms")
	}
	reports, err := unpackReports(req.GetReports())
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: malformed Atoms request: %v", sdk.ErrBadReport, err))
	}
	idx, err := am.Atoms(ctx, req.GetEps0(), int(req.GetSet()), req.GetInputs(), reports)
	if err != nil {
		return nil, toStatus(err)
	}
	if len(idx) != len(reports) {
		return nil, internal("Atoms", fmt.Sprintf("%d atoms for %d reports", len(idx), len(reports)))
	}
	atoms := make([]uint32, len(idx))
	for i, a := range idx {
		if a < 0 || int64(a) > math.MaxUint32 {
			return nil, internal("Atoms", fmt.Sprintf("atom %d of report %d", a, i))
		}
		atoms[i] = uint32(a)
	}
	return &randomizerv1.AtomsResponse{Atoms: atoms}, nil
}

// SampleBlanket implements randomizerv1.RandomizerServer: UNIMPLEMENTED
// unless the randomizer is an sdk.BlanketSampler. An answer with another
// number of reports than asked is an internal error.
func (s *Server) SampleBlanket(ctx context.Context, req *randomizerv1.SampleBlanketRequest) (_ *randomizerv1.SampleBlanketResponse, err error) {
	defer s.recoverPanic("SampleBlanket", &err)
	r, err := s.randomizer()
	if err != nil {
		return nil, err
	}
	bs, ok := r.(sdk.BlanketSampler)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "sdk: this plugin does not draw from its blanket (sdk.BlanketSampler)")
	}
	n := req.GetCount()
	if uint64(n) > sdk.MaxBlanketDraws {
		return nil, toStatus(fmt.Errorf("%w: %d blanket draws, must be at most %d", sdk.ErrBadInput, n, sdk.MaxBlanketDraws))
	}
	reports, err := bs.SampleBlanket(ctx, req.GetEps0(), int(n))
	if err != nil {
		return nil, toStatus(err)
	}
	if uint64(len(reports)) != uint64(n) {
		return nil, internal("SampleBlanket", fmt.Sprintf("%d reports for %d draws", len(reports), n))
	}
	packed, err := packReports(reports)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sdk: plugin's SampleBlanket: %v", err)
	}
	return &randomizerv1.SampleBlanketResponse{Reports: packed}, nil
}
