package rpc

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/blanket-dp/blanket/sdk"
	randomizerv1 "github.com/blanket-dp/blanket/sdk/proto/blanket/randomizer/v1"
)

// Conversions between the sdk types and their protobuf mirrors. Slices are
// shared, not copied: every message is built for one call or freshly decoded
// from the wire, and owned by the side that built or decoded it.

func configToProto(c sdk.Config) *randomizerv1.Config {
	return &randomizerv1.Config{
		Categories: c.Categories,
		Other:      c.Other,
		Lo:         c.Lo,
		Hi:         c.Hi,
		Confidence: c.Confidence,
		Params:     c.Params,
	}
}

func configFromProto(c *randomizerv1.Config) sdk.Config {
	return sdk.Config{
		Categories: c.GetCategories(),
		Other:      c.GetOther(),
		Lo:         c.GetLo(),
		Hi:         c.GetHi(),
		Confidence: c.GetConfidence(),
		Params:     c.GetParams(),
	}
}

func inputKindToProto(k sdk.InputKind) randomizerv1.InputKind {
	switch k {
	case sdk.InputCategorical:
		return randomizerv1.InputKind_INPUT_KIND_CATEGORICAL
	case sdk.InputReal:
		return randomizerv1.InputKind_INPUT_KIND_REAL
	default:
		return randomizerv1.InputKind_INPUT_KIND_UNSPECIFIED
	}
}

func inputKindFromProto(k randomizerv1.InputKind) sdk.InputKind {
	switch k {
	case randomizerv1.InputKind_INPUT_KIND_CATEGORICAL:
		return sdk.InputCategorical
	case randomizerv1.InputKind_INPUT_KIND_REAL:
		return sdk.InputReal
	default:
		return sdk.InputUnspecified
	}
}

func descriptionToProto(d *sdk.Description) *randomizerv1.Description {
	params := make([]*randomizerv1.Param, len(d.Params))
	for i, p := range d.Params {
		params[i] = &randomizerv1.Param{Name: p.Name, Value: p.Value, Doc: p.Doc}
	}
	return &randomizerv1.Description{
		Name:        d.Name,
		Version:     d.Version,
		Input:       inputKindToProto(d.Input),
		Categories:  d.Categories,
		Other:       d.Other,
		Lo:          d.Lo,
		Hi:          d.Hi,
		Encoding:    d.Encoding,
		ReportBytes: int64(d.ReportBytes),
		Params:      params,
		Eps0Min:     d.Eps0Min,
		Eps0Max:     d.Eps0Max,
		Digest:      d.Digest,
		Stateful:    d.Stateful,
		Span:        d.Span,
	}
}

func descriptionFromProto(d *randomizerv1.Description) *sdk.Description {
	var params []sdk.Param
	if ps := d.GetParams(); len(ps) > 0 {
		params = make([]sdk.Param, len(ps))
		for i, p := range ps {
			params[i] = sdk.Param{Name: p.GetName(), Value: p.GetValue(), Doc: p.GetDoc()}
		}
	}
	return &sdk.Description{
		Name:        d.GetName(),
		Version:     d.GetVersion(),
		Input:       inputKindFromProto(d.GetInput()),
		Categories:  d.GetCategories(),
		Other:       d.GetOther(),
		Lo:          d.GetLo(),
		Hi:          d.GetHi(),
		Encoding:    d.GetEncoding(),
		ReportBytes: int(d.GetReportBytes()),
		Params:      params,
		Eps0Min:     d.GetEps0Min(),
		Eps0Max:     d.GetEps0Max(),
		Digest:      d.GetDigest(),
		Stateful:    d.GetStateful(),
		Span:        d.GetSpan(),
	}
}

func statisticToProto(s *sdk.Statistic) *randomizerv1.Statistic {
	if s == nil {
		return nil
	}
	return &randomizerv1.Statistic{
		Plugin:    s.Plugin,
		Digest:    s.Digest,
		Eps0:      s.Eps0,
		N:         s.N,
		Malformed: s.Malformed,
		Counts:    s.Counts,
		Draws:     s.Draws,
	}
}

func statisticFromProto(s *randomizerv1.Statistic) *sdk.Statistic {
	if s == nil {
		return nil
	}
	return &sdk.Statistic{
		Plugin:    s.GetPlugin(),
		Digest:    s.GetDigest(),
		Eps0:      s.GetEps0(),
		N:         s.GetN(),
		Malformed: s.GetMalformed(),
		Counts:    s.GetCounts(),
		Draws:     s.GetDraws(),
	}
}

func estimateToProto(e *sdk.Estimate) *randomizerv1.Estimate {
	items := make([]*randomizerv1.Item, len(e.Items))
	for i, it := range e.Items {
		items[i] = &randomizerv1.Item{
			Label:    it.Label,
			Value:    it.Value,
			Variance: it.Variance,
			Lo:       it.Lo,
			Hi:       it.Hi,
			Post:     it.Post,
			PostLo:   it.PostLo,
			PostHi:   it.PostHi,
		}
	}
	return &randomizerv1.Estimate{
		Plugin:     e.Plugin,
		Eps0:       e.Eps0,
		N:          e.N,
		Malformed:  e.Malformed,
		Confidence: e.Confidence,
		Items:      items,
	}
}

func estimateFromProto(e *randomizerv1.Estimate) *sdk.Estimate {
	var items []sdk.Item
	if its := e.GetItems(); len(its) > 0 {
		items = make([]sdk.Item, len(its))
		for i, it := range its {
			items[i] = sdk.Item{
				Label:    it.GetLabel(),
				Value:    it.GetValue(),
				Variance: it.GetVariance(),
				Lo:       it.GetLo(),
				Hi:       it.GetHi(),
				Post:     it.GetPost(),
				PostLo:   it.GetPostLo(),
				PostHi:   it.GetPostHi(),
			}
		}
	}
	return &sdk.Estimate{
		Plugin:     e.GetPlugin(),
		Eps0:       e.GetEps0(),
		N:          e.GetN(),
		Malformed:  e.GetMalformed(),
		Confidence: e.GetConfidence(),
		Items:      items,
	}
}

// packReports packs a batch of reports into one buffer and their lengths,
// or their common length when they all have the same.
func packReports(reports [][]byte) (*randomizerv1.Reports, error) {
	if uint64(len(reports)) > math.MaxUint32 {
		return nil, fmt.Errorf("%d reports, more than a message can carry", len(reports))
	}
	total, same := 0, true
	for i, r := range reports {
		if uint64(len(r)) > math.MaxUint32 {
			return nil, fmt.Errorf("report %d has %d bytes, more than a message can carry", i, len(r))
		}
		total += len(r)
		same = same && len(r) == len(reports[0])
	}
	data := make([]byte, 0, total)
	for _, r := range reports {
		data = append(data, r...)
	}
	p := &randomizerv1.Reports{Data: data}
	if same && len(reports) > 0 && len(reports[0]) > 0 {
		p.Size, p.Count = uint32(len(reports[0])), uint32(len(reports))
		return p, nil
	}
	p.Lengths = make([]uint32, len(reports))
	for i, r := range reports {
		p.Lengths[i] = uint32(len(r))
	}
	return p, nil
}

// unpackReports splits a packed batch into its reports, which share the
// message's buffer (each capped at its own length, so appending to one
// cannot overwrite the next). It fails unless the lengths add up to the
// data exactly.
func unpackReports(p *randomizerv1.Reports) ([][]byte, error) {
	data, lengths := p.GetData(), p.GetLengths()
	if len(lengths) == 0 {
		size, count := uint64(p.GetSize()), uint64(p.GetCount())
		if size == 0 && count > 0 {
			// Empty reports are listed in lengths, so that the data bounds
			// the number of reports.
			return nil, fmt.Errorf("%d reports of size 0", count)
		}
		if size*count != uint64(len(data)) { // both < 2^32: no overflow
			return nil, fmt.Errorf("%d reports of %d bytes, data has %d", count, size, len(data))
		}
		out := make([][]byte, count)
		n := int(size)
		for i := range out {
			out[i] = data[i*n : (i+1)*n : (i+1)*n]
		}
		return out, nil
	}
	if p.GetSize() != 0 || p.GetCount() != 0 {
		return nil, fmt.Errorf("both %d lengths and a common size %d, count %d", len(lengths), p.GetSize(), p.GetCount())
	}
	out := make([][]byte, len(lengths))
	off := 0
	for i, l := range lengths {
		n := int(l)
		if n > len(data)-off {
			return nil, fmt.Errorf("report %d has length %d but only %d bytes of data are left", i, n, len(data)-off)
		}
		out[i] = data[off : off+n : off+n]
		off += n
	}
	if off != len(data) {
		return nil, fmt.Errorf("report lengths add up to %d bytes, data has %d", off, len(data))
	}
	return out, nil
}

// encodeInputs dictionary-encodes categorical inputs.
func encodeInputs(in sdk.Inputs) *randomizerv1.Inputs {
	p := &randomizerv1.Inputs{Reals: in.Reals}
	if len(in.Categories) == 0 {
		return p
	}
	index := map[string]uint32{}
	p.Categories = make([]uint32, len(in.Categories))
	for i, c := range in.Categories {
		j, ok := index[c]
		if !ok {
			j = uint32(len(p.Labels))
			index[c] = j
			p.Labels = append(p.Labels, []byte(c))
		}
		p.Categories[i] = j
	}
	return p
}

// decodeInputs reverses encodeInputs. It fails on an index outside the
// labels.
func decodeInputs(p *randomizerv1.Inputs) (sdk.Inputs, error) {
	in := sdk.Inputs{Reals: p.GetReals()}
	idx := p.GetCategories()
	if len(idx) == 0 {
		return in, nil
	}
	labels := make([]string, len(p.GetLabels()))
	for i, l := range p.GetLabels() {
		labels[i] = string(l)
	}
	in.Categories = make([]string, len(idx))
	for i, j := range idx {
		if uint64(j) >= uint64(len(labels)) {
			return sdk.Inputs{}, fmt.Errorf("input %d has label index %d, there are %d labels", i, j, len(labels))
		}
		in.Categories[i] = labels[j]
	}
	return in, nil
}

// packedInputs returns the inputs of p as sdk.PackedInputs, sharing its slices.
// It fails on an index outside the labels.
func packedInputs(p *randomizerv1.Inputs) (sdk.PackedInputs, error) {
	in := sdk.PackedInputs{Index: p.GetCategories(), Reals: p.GetReals()}
	raw := p.GetLabels()
	if len(in.Index) == 0 {
		return in, nil
	}
	if i := badIndex(in.Index, len(raw)); i >= 0 {
		return sdk.PackedInputs{}, fmt.Errorf("input %d has label index %d, there are %d labels", i, in.Index[i], len(raw))
	}
	in.Labels = make([]string, len(raw))
	for i, l := range raw {
		in.Labels[i] = string(l)
	}
	return in, nil
}

// badIndex returns the position of the first index that is not less than
// n, or -1.
func badIndex(idx []uint32, n int) int {
	var m uint32
	for _, j := range idx {
		m = max(m, j)
	}
	if uint64(m) < uint64(n) {
		return -1
	}
	for i, j := range idx {
		if uint64(j) >= uint64(n) {
			return i
		}
	}
	return -1
}

// checkUTF8 returns an error naming the first string of cfg that is not
// valid UTF-8: protobuf string fields cannot carry it.
func checkUTF8(cfg sdk.Config) error {
	bad := func(what, s string) error {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", sdk.ErrBadConfig, what, s)
	}
	for _, c := range cfg.Categories {
		if !utf8.ValidString(c) {
			return bad("category", c)
		}
	}
	if !utf8.ValidString(cfg.Other) {
		return bad("other label", cfg.Other)
	}
	for k, v := range cfg.Params {
		if !utf8.ValidString(k) {
			return bad("parameter name", k)
		}
		if !utf8.ValidString(v) {
			return bad("parameter value", v)
		}
	}
	return nil
}
