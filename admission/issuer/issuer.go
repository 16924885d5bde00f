package issuer

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/oprf"
)

// Errors.
var (
	// ErrOptions reports an invalid Options field; the message names it.
	ErrOptions = errors.New("issuer: bad options")
	// ErrForged reports a token whose output is not the OPRF output on
	// its input under its pool key's key: forged, damaged, or of another
	// pool key or period.
	ErrForged = errors.New("issuer: forged token")
	// ErrNoToken reports the zero Token: an envelope without one.
	ErrNoToken = errors.New("issuer: no token")
)

// Defaults.
const (
	// DefaultGracePeriods is the grace, in periods of a pool key's period,
	// during which a period that has ended is still granted (as
	// plan.DefaultGrace): apps seal a period's report after it ends, and
	// the shuffler takes it until then.
	DefaultGracePeriods = 8
	// DefaultPrefetch is how many periods after the current one are
	// granted ahead, so that an app can hold its tokens before it needs
	// them and fetch them apart from when it spends them.
	DefaultPrefetch = 3
)

// Options configure an Issuer.
type Options struct {
	// Seed is the issuer's secret (SeedSize bytes: LoadOrCreateSeed).
	// Required.
	Seed []byte
	// Store names where grants are kept: a postgres:// URL (a database
	// replicas share, schema blanket_issuer) or "" for the SQLite file
	// StoreFile in Dir.
	Store string
	// Dir is the data directory of the SQLite store. Required unless
	// Store is a URL.
	Dir string
	// Grace is how long after a pool key's period ends it is still
	// granted; its grants are forgotten then. Defaults to
	// DefaultGracePeriods periods of each pool key's own period. It must
	// be at least the shuffler's (Options.PeriodGrace there). Replicas
	// with different graces stop granting a period at the shortest.
	Grace time.Duration
	// Prefetch is how many periods after the current one are granted.
	// Defaults to DefaultPrefetch; negative grants none ahead.
	Prefetch int
	// Allow, when set, is asked about every pool key whose period is
	// granted: false refuses it (admission.RefusedPool). The server passes
	// the pools and epochs of the plans it serves. Defaults to any pool.
	Allow func(pool, epoch string, period report.Period) bool
	// Now is the clock that decides which periods are granted. Defaults
	// to time.Now.
	Now func() time.Time
	// Logger receives the handler's store failures (never an identity).
	// Defaults to none.
	Logger *slog.Logger
}

// Issuer grants admission tokens: at most one evaluation per
// authenticated identity and pool key, stored before it is answered. It
// is safe for concurrent use.
type Issuer struct {
	o     Options
	keys  *keyring
	idKey []byte
	store store
}

// New opens an issuer and its store (creating the SQLite file or
// migrating the PostgreSQL schema).
func New(ctx context.Context, o Options) (*Issuer, error) {
	if err := checkSeed(o.Seed); err != nil {
		return nil, err
	}
	if o.Grace < 0 {
		return nil, fmt.Errorf("%w: Grace = %v, must be >= 0", ErrOptions, o.Grace)
	}
	if o.Prefetch == 0 {
		o.Prefetch = DefaultPrefetch
	}
	o.Prefetch = max(o.Prefetch, 0)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := openStore(ctx, o.Store, o.Dir)
	if err != nil {
		return nil, err
	}
	return &Issuer{o: o, keys: newKeyring(o.Seed), idKey: identityKey(o.Seed), store: st}, nil
}

// Close closes the store.
func (is *Issuer) Close() error { return is.store.close() }

// Ready returns nil when the store takes reads and writes.
func (is *Issuer) Ready(ctx context.Context) error { return is.store.ready(ctx) }

// Forget deletes the grants whose period's deadline (end plus grace) has
// passed and returns how many it deleted. Periods so forgotten are never
// granted again. The server calls it periodically (every few minutes);
// until it does, grants only take room.
func (is *Issuer) Forget(ctx context.Context) (int64, error) {
	return is.store.forget(ctx, is.o.Now().Unix())
}

// deadline returns the Unix second until which period p is granted.
func (is *Issuer) deadline(p report.Period) int64 {
	if is.o.Grace > 0 {
		return p.End() + int64(is.o.Grace/time.Second)
	}
	return p.End() + DefaultGracePeriods*p.Length
}

// granted returns "" when period p is granted at Unix second now, else
// why not.
func (is *Issuer) granted(p report.Period, now int64) string {
	if now >= is.deadline(p) {
		return fmt.Sprintf("period %s is over (its grace ended at %d)", p, is.deadline(p))
	}
	current := now - now%p.Length
	if ahead := (p.Start - current) / p.Length; ahead > int64(is.o.Prefetch) {
		return fmt.Sprintf("period %s is %d periods ahead, more than %d", p, ahead, is.o.Prefetch)
	}
	return ""
}

// Issue answers the request of the instance named id: one evaluation or
// refusal per item, in order. An item is refused when its pool key or
// blinded element does not decode (admission.RefusedMalformed), its
// pool key was asked earlier in the request (RefusedDuplicate), its
// period is not granted now (RefusedPeriod: ended more than Grace ago,
// more than Prefetch periods ahead, or forgotten), Options.Allow refuses
// it (RefusedPool), or the identity was granted its pool key for another
// blinded element (RefusedAlreadyGranted). The same blinded element
// again gets the same evaluation. The grants are committed before Issue
// returns; an error (the store failed) grants nothing new, and the
// caller answers 503 so that the instance retries.
func (is *Issuer) Issue(ctx context.Context, id auth.Identity, req *admission.TokenRequest) (*admission.TokenResponse, error) {
	if n := len(req.Requests); n == 0 || n > admission.MaxRequests {
		return nil, fmt.Errorf("%w: %d requests, want 1 to %d", admission.ErrCount, n, admission.MaxRequests)
	}
	now := is.o.Now().Unix()
	idHash := hashIdentity(is.idKey, id.Issuer, id.Subject)
	resp := &admission.TokenResponse{Evaluations: make([]admission.Evaluation, len(req.Requests))}
	refuse := func(i int, code, format string, args ...any) {
		resp.Evaluations[i].Refused, resp.Evaluations[i].Reason = code, fmt.Sprintf(format, args...)
	}
	var gs []grant
	var at []int // at[j] is the request index of gs[j]
	seen := make(map[string]bool, len(req.Requests))
	for i, item := range req.Requests {
		resp.Evaluations[i].Pool = item.Pool
		g, code, reason := is.prepare(item, now, seen)
		if code != "" {
			refuse(i, code, "%s", reason)
			continue
		}
		g.identity = idHash
		gs, at = append(gs, g), append(at, i)
	}
	if len(gs) == 0 {
		return resp, nil
	}
	st, err := is.store.grant(ctx, gs)
	if err != nil {
		return nil, err
	}
	for j, s := range st {
		i := at[j]
		switch {
		case s.closed:
			refuse(i, admission.RefusedPeriod, "period %s was closed", gs[j].period)
		case s.blinded != gs[j].blinded:
			refuse(i, admission.RefusedAlreadyGranted, "this instance was granted a token of this pool key for another blinded element")
		default:
			resp.Evaluations[i].Evaluated = s.evaluated
		}
	}
	return resp, nil
}

// prepare checks one item and evaluates its blinded element, or returns
// a refusal code and reason.
func (is *Issuer) prepare(item admission.BlindedItem, now int64, seen map[string]bool) (g grant, code, reason string) {
	period, err := admission.CheckPoolKey(item.Pool)
	if err != nil {
		return g, admission.RefusedMalformed, err.Error()
	}
	if seen[item.Pool] {
		return g, admission.RefusedDuplicate, "pool key asked earlier in this request"
	}
	seen[item.Pool] = true
	if why := is.granted(period, now); why != "" {
		return g, admission.RefusedPeriod, why
	}
	if is.o.Allow != nil {
		pool, epoch, _, _ := report.ParsePoolKey(item.Pool)
		if !is.o.Allow(pool, epoch, period) {
			return g, admission.RefusedPool, fmt.Sprintf("pool %q of epoch %q is not admitted", pool, epoch)
		}
	}
	e := group.Ristretto255.NewElement()
	if len(item.Blinded) != admission.ElementSize || e.UnmarshalBinary(item.Blinded) != nil || e.IsIdentity() {
		return g, admission.RefusedMalformed, "blinded element is not a ristretto255 element other than the identity"
	}
	s, err := is.keys.server(item.Pool)
	if err != nil {
		return g, admission.RefusedMalformed, err.Error()
	}
	ev, err := s.Evaluate(&oprf.EvaluationRequest{Elements: []oprf.Blinded{e}})
	if err != nil || len(ev.Elements) != 1 {
		return g, admission.RefusedMalformed, fmt.Sprintf("evaluation failed: %v", err)
	}
	evaluated, err := ev.Elements[0].MarshalBinaryCompress()
	if err != nil {
		return g, admission.RefusedMalformed, fmt.Sprintf("evaluation failed: %v", err)
	}
	return grant{
		pool:      item.Pool,
		period:    period,
		deadline:  is.deadline(period),
		blinded:   sha256.Sum256(item.Blinded),
		evaluated: evaluated,
	}, "", ""
}
