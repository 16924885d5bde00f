package collector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// A collector's use of its report keys (keys.go): the schedule in the
// plan it serves, the key a batch opens under, and Run, which rotates
// and erases keys.

// servedPlan is the plan GET /v1/plan serves: the current epoch's plan
// with the key schedule, its bytes and signature headers.
type servedPlan struct {
	plan *plan.Plan
	json []byte
	// etag is the plan's Digest, key schedule included.
	etag     string
	sig, end string
	// keys are the ids of its schedule, joined: what a republication
	// compares.
	keys string
}

// keyMaxAge bounds how old the schedule an ingest opens by may be: older,
// it is read from the store again (keys.go: replicas agree on a period's
// key).
const keyMaxAge = time.Second

// openKeys computes the retention of retired keys (the longest grace of
// the published plans plus KeySlack) and serves the plan with the key
// schedule. publish has run.
func (c *Collector) openKeys(ctx context.Context) error {
	grace := c.plan.GraceLength()
	stored, err := c.st.plans(ctx, "")
	if err != nil {
		return fmt.Errorf("collector: stored plans: %w", err)
	}
	for _, st := range stored {
		if p, err := plan.Parse(st.plan); err == nil {
			grace = max(grace, p.GraceLength())
		}
	}
	c.retention = grace + c.o.KeySlack
	return c.republish(c.keys.held(), true)
}

// republish serves the plan with the keys of ring not deleted, signed,
// when they differ from those served (always with force).
func (c *Collector) republish(ring *keyRing, force bool) error {
	keys := ring.published(c.o.Now().Unix(), c.retention)
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	joined := strings.Join(ids, ",")
	if cur := c.served.Load(); !force && cur != nil && cur.keys == joined {
		return nil
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: no report key to publish", ErrKeyStore)
	}
	p, err := clonePlan(c.plan)
	if err != nil {
		return err
	}
	p.CollectorKeys = keys
	b, err := p.JSON()
	if err != nil {
		return err
	}
	s := &servedPlan{plan: p, json: b, etag: p.Digest(), keys: joined}
	s.sig, s.end = plan.SignPlan(c.signer.key, b, c.signer.chain).Headers()
	c.served.Store(s)
	return nil
}

// errNoKey reports a period no report key seals.
var errNoKey = errors.New("no report key seals the period")

// keyFor returns the private key that opens reports of period (keys.go):
// that of the schedule's key for the period. A key deleted, or past its
// erasure's time, is ErrKeyDeleted; a period before every key errNoKey
// (nothing of either can open). A key whose private half is not at hand
// (a key directory not shared with this replica) is another error: the
// batch is not stored, and is retried.
func (c *Collector) keyFor(ctx context.Context, period report.Period) (*ringKey, error) {
	ring, err := c.keys.current(ctx, keyMaxAge)
	if err != nil {
		return nil, err
	}
	i := ring.forPeriod(period)
	if i < 0 {
		return nil, fmt.Errorf("%w: %s", errNoKey, period)
	}
	k := ring.keys[i]
	if ring.state(i, c.o.Now().Unix(), c.retention) == KeyDeleted {
		when, _ := ring.until(i, c.retention)
		if k.deleted != 0 {
			when = k.deleted
		}
		return k, fmt.Errorf("%w: key %s, deleted at %s", ErrKeyDeleted, k.id, time.Unix(when, 0).UTC().Format(time.RFC3339))
	}
	if k.priv == nil {
		return nil, fmt.Errorf("collector: report key %s of period %s: %w", k.id, period, k.privErr)
	}
	return k, nil
}

// keyInterval returns how often Run looks at the keys: a tenth of the
// plan's period, between 1 s and 1 min.
func (c *Collector) keyInterval() time.Duration {
	return min(max(c.plan.PeriodLength()/10, time.Second), time.Minute)
}

// Run keeps the report keys until ctx is done (keys.go): at least once a
// minute it reads the schedule (keys another replica or blanket collector
// rotate-key added), publishes the next key when KeyRotation says one is
// due, erases the private halves whose time has come and serves the plan
// with the schedule as it then is. A failed pass is logged and tried
// again. It returns nil when ctx is done.
func (c *Collector) Run(ctx context.Context) error {
	t := time.NewTicker(c.keyInterval())
	defer t.Stop()
	for {
		if err := c.keepKeys(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("keeping the report keys", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// keepKeys is one pass of Run.
func (c *Collector) keepKeys(ctx context.Context) error {
	var errs []error
	if c.o.KeyRotation > 0 {
		added, err := c.keys.rotateDue(ctx, c.o.KeyRotation, c.plan.PeriodLength(), c.o.KeyLead)
		if err != nil {
			errs = append(errs, fmt.Errorf("rotating: %w", err))
		} else if added != nil {
			c.log.Info("published the next report key", "key", added.id, "from", time.Unix(added.from, 0).UTC())
		}
	}
	erased, err := c.keys.eraseDue(ctx, c.retention)
	if err != nil {
		errs = append(errs, fmt.Errorf("erasing: %w", err))
	}
	for _, id := range erased {
		c.log.Info("deleted the private half of a retired report key: batches of its periods no longer open", "key", id)
	}
	ring, err := c.keys.load(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	now := c.o.Now().Unix()
	for i, k := range ring.keys {
		if k.privErr != nil && ring.state(i, now, c.retention) != KeyDeleted {
			errs = append(errs, k.privErr)
		}
	}
	if err := c.republish(ring, false); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ReportKeys returns the collector's report key schedule as it is now,
// with the states Run gives the keys.
func (c *Collector) ReportKeys(ctx context.Context) ([]ReportKey, error) {
	ring, err := c.keys.load(ctx)
	if err != nil {
		return nil, err
	}
	return ring.describe(c.o.Now().Unix(), c.retention), nil
}

// KeyOptions names where a collector keeps its report keys, for
// RotateReportKey run beside it (blanket collector rotate-key).
type KeyOptions struct {
	// Dir, Store and KeyDir are as the collector's (CollectorOptions).
	Dir, Store, KeyDir string
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// KeyRotationResult is what RotateReportKey did.
type KeyRotationResult struct {
	// Added is the new key.
	Added ReportKey
	// Withdrawn are the pending keys it replaced (erased: nothing was
	// sealed to them).
	Withdrawn []string
	// Schedule is the schedule after the rotation. A retired key shows as
	// retired until the collector erases it (its time depends on the
	// collector's grace and slack, unknown here).
	Schedule []ReportKey
}

// RotateReportKey schedules a new report key for the collector that keeps
// its state where o says: valid from the first period boundary at least
// one period (and DefaultKeyLead) from now, so that apps fetch it before
// it is used, replacing any pending key. The collector must have started
// once (its plan gives the period). Running collectors pick the key up
// within a minute (Run) and serve it in their plan; the key before it
// retires at its start and is erased once its periods' reports cannot
// arrive any more.
func RotateReportKey(ctx context.Context, o KeyOptions) (KeyRotationResult, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	co := CollectorOptions{Dir: o.Dir, Store: o.Store, KeyDir: o.KeyDir, Plan: &plan.Plan{}}
	if co.KeyDir == "" && !pgdb.IsURL(co.Store) {
		co.KeyDir = co.Dir
	}
	if co.KeyDir != "" {
		if err := secrets.EnsureDir(co.KeyDir); err != nil {
			return KeyRotationResult{}, fmt.Errorf("%w: %v", ErrOptions, err)
		}
	}
	st, err := openStore(ctx, co)
	if err != nil {
		return KeyRotationResult{}, err
	}
	defer st.close()
	keys := newKeyKeeper(st, co.KeyDir, o.Now)
	if err := keys.check(ctx, false); err != nil {
		return KeyRotationResult{}, err
	}
	stored, err := st.plans(ctx, "")
	if err != nil {
		return KeyRotationResult{}, err
	}
	if len(stored) == 0 {
		return KeyRotationResult{}, fmt.Errorf("%w: no plan published yet: start the collector once (it makes the first key)", ErrKeyStore)
	}
	p, err := plan.Parse(stored[0].plan)
	if err != nil {
		return KeyRotationResult{}, fmt.Errorf("collector: the latest published plan: %w", err)
	}
	added, withdrawn, err := keys.rotateNow(ctx, p.PeriodLength(), DefaultKeyLead)
	if err != nil {
		return KeyRotationResult{}, err
	}
	ring, err := keys.load(ctx)
	if err != nil {
		return KeyRotationResult{}, err
	}
	res := KeyRotationResult{Withdrawn: withdrawn, Schedule: ring.describe(o.Now().Unix(), -1)}
	if i := slices.IndexFunc(res.Schedule, func(k ReportKey) bool { return k.ID == added.id }); i >= 0 {
		res.Added = res.Schedule[i]
	}
	return res, nil
}
