// Package longitudinal is the tree-based longitudinal protocol of
// Erlingsson, Feldman, Mironov, Raghunathan, Talwar and Thakurta (SODA 2019,
// Section 3): a boolean state reported every period, private over its whole
// history. It implements sdk.Randomizer and sdk.Stateful.
//
// Periods are grouped in trees of H periods (H a power of two, aligned to
// multiples of H in the period index). At its first step in a tree a user
// draws, once, the change j in [1, k] it will report and a level h in
// [1, L], L = log2(H)+1 (step.go, Algorithm 1). Its state bit starts at 0
// in each tree; of its changes only the j-th is ever reported: at the end
// of each node of level h (a dyadic span of 2^(h-1) periods) it sends
// randomized response on the node's value (the sign of the j-th change if
// it lies in the node, else 0), labelled with the node. Other periods send
// nothing. The whole transcript of a tree is eps0-LDP whatever the state
// does (Theorem 5); the accountant's Longitudinal bounds it after shuffling.
//
// The collector sums each node's reports over users and estimates the
// number of users in state 1 at any period p of the tree from the at most
// L nodes that cover [1, p] (estimate.go, Algorithm 2, with the exact
// variance of the estimate).
//
// Limits, enforced on the client:
//
//   - Changes past the k-th in a tree are never reported (only j <= k is
//     drawn): a user whose state changes more often is counted as if its
//     state had stayed where the k-th change left it, until the next tree.
//
//   - Past H periods a new tree starts: the user draws new choices, its
//     state bit restarts from 0 (its current state then counts as a change
//     at the tree's first period). Each tree is a new transcript; the
//     accountant composes the trees a window meets.
//
//   - A node whose end falls in a period the user did not step (the app
//     was not running) is not reported: the user is then missing from that
//     node's sum, which biases the estimates of periods that node covers.
//
// It does not implement sdk.BlanketSampler, so a shuffler cannot add
// blanket reports (a privacy floor) to its batches. A draw would have to
// be a report of a node of some level ending at the period, yet which
// levels report in a period, and how many users hold each, follow from
// the users' data-independent choices, and the accountant's bound for a
// tree (accountant.Longitudinal) is not a blanket decomposition of
// independent reports: each round of randomized response is shuffled
// among the victim's level-mates only, and a tree declaration refuses to
// decompose. A floor for it needs draws per level and node counted by
// that bound, which it does not have.
//
//	r, err := longitudinal.New(longitudinal.Options{Tree: 64, Changes: 4})
//	reports, states, err := r.Step(ctx, eps0, period, states, sdk.Inputs{Categories: values})
//	stat, err := r.Accumulate(ctx, eps0, shuffled) // merge the tree's periods up to p
//	est, err := r.Estimate(ctx, stat)              // users in state 1 at p
package longitudinal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Plugin identity and limits.
const (
	// Name is the plugin name.
	Name = "longitudinal"
	// Version is the report format version.
	Version = "1"
	// ReportBytes is the length of a report: level (1 byte), node index
	// (2 bytes, big-endian), bit (1 byte, 0 for -1 and 1 for +1).
	ReportBytes = 4
	// MaxTree is the largest number of periods per tree.
	MaxTree = 1 << 12
	// MaxChanges is the largest k. The state counts changes up to k+1 in
	// one byte; past a few changes the estimates' variance, which grows
	// as k², is of little use anyway.
	MaxChanges = 128
	// DefaultTree and DefaultChanges are the defaults of Options.
	DefaultTree    = 64
	DefaultChanges = 4
)

// Options configures the randomizer.
type Options struct {
	// Off and On label the two states. Default "false" and "true".
	Off, On string
	// Tree is H, the number of periods per tree: a power of two in
	// [1, MaxTree]. Defaults to DefaultTree.
	Tree int
	// Changes is k, the number of changes per tree the estimates follow:
	// in [1, min(Tree, MaxChanges)]. Defaults to DefaultChanges (or Tree
	// when that is smaller).
	Changes int
	// Confidence is the level of the confidence intervals. Defaults to 0.95.
	Confidence float64
	// Rand is the randomness source. Defaults to crypto/rand. An injected
	// source is shared by all calls, which then must not run concurrently.
	Rand ldp.Source
}

// Randomizer is the longitudinal protocol. It is safe for concurrent use
// unless Options.Rand was set.
type Randomizer struct {
	dom  *ldp.Domain
	tree tree
	k    int
	conf float64
	src  ldp.Source
	desc sdk.Description
}

var (
	_ sdk.Randomizer   = (*Randomizer)(nil)
	_ sdk.Stateful     = (*Randomizer)(nil)
	_ sdk.OutputMapper = (*Randomizer)(nil)
)

// New returns the randomizer. Errors wrap sdk.ErrBadConfig.
func New(opts Options) (*Randomizer, error) {
	conf, err := ldp.Confidence(opts.Confidence)
	if err != nil {
		return nil, err
	}
	off, on := opts.Off, opts.On
	if off == "" && on == "" {
		off, on = "false", "true"
	}
	dom, err := ldp.NewDomain([]string{off, on}, "", 2)
	if err != nil {
		return nil, err
	}
	H := opts.Tree
	if H == 0 {
		H = DefaultTree
	}
	if H < 1 || H > MaxTree || H&(H-1) != 0 {
		return nil, fmt.Errorf("%w: %s: tree = %d, must be a power of two in [1, %d]", sdk.ErrBadConfig, Name, H, MaxTree)
	}
	k := opts.Changes
	if k == 0 {
		k = min(DefaultChanges, H)
	}
	if k < 1 || k > min(H, MaxChanges) {
		return nil, fmt.Errorf("%w: %s: changes = %d, must be in [1, %d] (at most the tree's %d periods)", sdk.ErrBadConfig, Name, k, min(H, MaxChanges), H)
	}
	t := newTree(H)
	r := &Randomizer{dom: dom, tree: t, k: k, conf: conf, src: opts.Rand}
	r.desc = sdk.Description{
		Name:        Name,
		Version:     Version,
		Input:       sdk.InputCategorical,
		Categories:  dom.Labels(),
		Encoding:    fmt.Sprintf("node report: level in [1,%d] (1 byte), node index (2 bytes, big-endian), bit (1 byte: 0 = -1, 1 = +1)", t.levels),
		ReportBytes: ReportBytes,
		Params: []sdk.Param{
			{Name: "tree", Value: strconv.Itoa(H), Doc: "periods per tree (a power of two); a new tree, with new random choices, starts every tree periods"},
			{Name: "changes", Value: strconv.Itoa(k), Doc: "changes per tree the estimates follow; later ones are not reported"},
		},
		Eps0Min:  ldp.MinEps0,
		Eps0Max:  ldp.MaxEps0,
		Stateful: true,
		Span:     int64(H),
	}
	r.desc.Digest = ldp.Digest(r.desc)
	return r, nil
}

// FromConfig returns the randomizer of a plugin-independent configuration:
// Categories (none, or the off and on labels in that order), Confidence,
// and the parameters "tree" and "changes". Errors wrap sdk.ErrBadConfig.
func FromConfig(cfg sdk.Config) (*Randomizer, error) {
	if err := ldp.CategoricalConfig(Name, cfg, "tree", "changes"); err != nil {
		return nil, err
	}
	if cfg.Other != "" {
		return nil, fmt.Errorf("%w: %s has two states and no other bucket", sdk.ErrBadConfig, Name)
	}
	opts := Options{Confidence: cfg.Confidence}
	switch len(cfg.Categories) {
	case 0:
	case 2:
		opts.Off, opts.On = cfg.Categories[0], cfg.Categories[1]
	default:
		return nil, fmt.Errorf("%w: %s takes two categories (off, on), got %d", sdk.ErrBadConfig, Name, len(cfg.Categories))
	}
	for name, dst := range map[string]*int{"tree": &opts.Tree, "changes": &opts.Changes} {
		if v, ok := cfg.Params[name]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %s = %q, must be an integer", sdk.ErrBadConfig, Name, name, v)
			}
			if n == 0 {
				return nil, fmt.Errorf("%w: %s: %s = 0", sdk.ErrBadConfig, Name, name)
			}
			*dst = n
		}
	}
	return New(opts)
}

// Tree returns the number of periods per tree.
func (r *Randomizer) Tree() int { return r.tree.periods }

// Changes returns k.
func (r *Randomizer) Changes() int { return r.k }

// Describe implements sdk.Randomizer.
func (r *Randomizer) Describe(ctx context.Context) (*sdk.Description, error) {
	return ldp.CopyDescription(&r.desc), nil
}

// Declare implements sdk.Randomizer: the law of one node's report (rows
// the node values -1, 0, +1; columns the bits -1, +1), marked as a tree
// protocol over Tree periods, whose reports the accountant composes with
// accountant.Longitudinal, never as independent reports.
func (r *Randomizer) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	m, err := declare.NewMatrix(declare.NodeMatrix(eps0))
	if err != nil {
		return nil, err
	}
	m.InputLabels = []string{"-1", "0", "+1"}
	m.OutputLabels = []string{"-1", "+1"}
	return &declare.Declaration{Eps0: eps0, Form: declare.FormMatrix, Matrix: m, Tree: r.tree.periods, Changes: r.k}, nil
}

// Randomize implements sdk.Randomizer: it fails, the reports of a stateful
// randomizer come from Step.
func (r *Randomizer) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	return nil, fmt.Errorf("%s: Randomize: %w: a stateful randomizer reports through Step", Name, errors.ErrUnsupported)
}

// Outputs implements sdk.OutputMapper: a report's bit, 0 for -1 and 1
// for +1 (the matrix's columns).
func (r *Randomizer) Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error) {
	out := make([]int, len(reports))
	for i, rep := range reports {
		_, _, b, err := r.decode(rep)
		if err != nil {
			return nil, fmt.Errorf("report %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// Decode returns a report's level, node index and bit (0 for -1, 1 for
// +1). Errors wrap sdk.ErrBadReport.
func (r *Randomizer) decode(rep []byte) (h, m, b int, err error) {
	if len(rep) != ReportBytes {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes, want %d", sdk.ErrBadReport, len(rep), ReportBytes)
	}
	h, m, b = int(rep[0]), int(rep[1])<<8|int(rep[2]), int(rep[3])
	if h < 1 || h > r.tree.levels || m < 1 || m > r.tree.nodes(h) || b > 1 {
		return 0, 0, 0, fmt.Errorf("%w: level %d, node %d, bit %d is not a node report of a tree of %d periods", sdk.ErrBadReport, h, m, b, r.tree.periods)
	}
	return h, m, b, nil
}

// Accumulate implements sdk.Randomizer. The statistic's Counts hold, for
// every node of the tree (level by level from the leaves), the number of
// reports of bit +1 and then of bit -1. Statistics of the periods of one
// tree merge into the tree's node sums.
func (r *Randomizer) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	return ldp.Accumulate(ctx, &r.desc, eps0, 2*r.tree.size(), reports, func(counts []int64, rep []byte) bool {
		h, m, b, err := r.decode(rep)
		if err != nil {
			return false
		}
		counts[2*r.tree.index(h, m)+1-b]++
		return true
	})
}

// zScore is the two-sided critical value of the configured confidence.
func (r *Randomizer) zScore() float64 { return ldp.ZScore(r.conf) }

// rrGain returns c = (e^eps0-1)/(e^eps0+1), the mean of a node report's
// bit per unit of node value.
func rrGain(eps0 float64) float64 { return math.Tanh(eps0 / 2) }
