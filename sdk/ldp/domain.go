package ldp

import (
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
)

// Domain is a categorical domain: a list of distinct category labels plus an
// optional "other" bucket, numbered 0..Size()-1 with the other bucket last.
type Domain struct {
	labels []string
	index  map[string]int
	other  int // index of the other bucket, -1 if none
}

// NewDomain returns the domain of categories plus, when other is not "", a
// catch-all bucket labelled other. Labels must be distinct (other included),
// there must be at least 2 buckets and at most maxSize. Errors wrap
// sdk.ErrBadConfig.
func NewDomain(categories []string, other string, maxSize int) (*Domain, error) {
	d := &Domain{index: make(map[string]int, len(categories)+1), other: -1}
	for i, c := range categories {
		if j, dup := d.index[c]; dup {
			return nil, fmt.Errorf("%w: category %q appears at %d and %d, categories must be distinct", sdk.ErrBadConfig, c, j, i)
		}
		d.index[c] = i
	}
	d.labels = append(d.labels, categories...)
	if other != "" {
		if j, dup := d.index[other]; dup {
			return nil, fmt.Errorf("%w: other bucket label %q is also category %d", sdk.ErrBadConfig, other, j)
		}
		d.other = len(d.labels)
		d.labels = append(d.labels, other)
	}
	if n := len(d.labels); n < 2 || n > maxSize {
		return nil, fmt.Errorf("%w: %d buckets (categories plus other), must be in [2,%d]", sdk.ErrBadConfig, n, maxSize)
	}
	return d, nil
}

// Size returns the number of buckets.
func (d *Domain) Size() int { return len(d.labels) }

// Labels returns a copy of the bucket labels in index order.
func (d *Domain) Labels() []string { return append([]string(nil), d.labels...) }

// Other returns the other bucket's label, or "".
func (d *Domain) Other() string {
	if d.other < 0 {
		return ""
	}
	return d.labels[d.other]
}

// Categories returns a copy of the category labels (without the other
// bucket).
func (d *Domain) Categories() []string {
	if d.other < 0 {
		return d.Labels()
	}
	return append([]string(nil), d.labels[:d.other]...)
}

// Index returns the bucket of value v: its category, else the other bucket.
// ok is false when v is not a category and there is no other bucket. The
// other bucket's own label is a category like any other.
func (d *Domain) Index(v string) (i int, ok bool) {
	if i, ok := d.index[v]; ok {
		return i, true
	}
	if d.other >= 0 {
		return d.other, true
	}
	return 0, false
}

// Indices maps a batch of values to buckets. Errors wrap sdk.ErrBadInput and
// name the first value outside the domain.
func (d *Domain) Indices(values []string) ([]int, error) {
	out := make([]int, len(values))
	for i, v := range values {
		j, ok := d.Index(v)
		if !ok {
			return nil, fmt.Errorf("%w: input %d: %q is not a category and there is no other bucket", sdk.ErrBadInput, i, v)
		}
		out[i] = j
	}
	return out, nil
}

// Batch maps the inputs of a categorical randomizer named plugin to
// buckets. Errors wrap sdk.ErrBadInput: the batch holds reals, or a value
// outside the domain (see Indices).
func (d *Domain) Batch(plugin string, in sdk.Inputs) ([]int, error) {
	if len(in.Reals) > 0 {
		return nil, fmt.Errorf("%w: %s takes categorical inputs, got %d reals", sdk.ErrBadInput, plugin, len(in.Reals))
	}
	return d.Indices(in.Categories)
}

// PackedBatch is Batch on dictionary-encoded inputs (see
// sdk.PackedRandomizer): it looks up each distinct label once. Errors are
// those of Batch on the same inputs, and an index outside in.Labels is
// rejected with sdk.ErrBadInput too.
func (d *Domain) PackedBatch(plugin string, in sdk.PackedInputs) ([]int, error) {
	if len(in.Reals) > 0 {
		return nil, fmt.Errorf("%w: %s takes categorical inputs, got %d reals", sdk.ErrBadInput, plugin, len(in.Reals))
	}
	buckets := make([]int, len(in.Labels))
	for i, l := range in.Labels {
		j, ok := d.Index(l)
		if !ok {
			j = -1
		}
		buckets[i] = j
	}
	out := make([]int, len(in.Index))
	for i, k := range in.Index {
		if uint64(k) >= uint64(len(buckets)) {
			return nil, fmt.Errorf("%w: input %d has label index %d, there are %d labels", sdk.ErrBadInput, i, k, len(buckets))
		}
		j := buckets[k]
		if j < 0 {
			return nil, fmt.Errorf("%w: input %d: %q is not a category and there is no other bucket", sdk.ErrBadInput, i, in.Labels[k])
		}
		out[i] = j
	}
	return out, nil
}
