package collector

// Rotating report keys (issue 25 item 4).
//
// The collector's HPKE report key rotates: a key is valid from a period
// boundary, the plan publishes the schedule (every key whose private half
// the collector still holds, each with the first period it seals) signed
// as the rest of the plan, an app seals period p's report to the key
// valid for p, and once no report of a retired key's periods can still
// arrive its private half is erased, so that batches of those periods
// cannot be opened by a later thief of the collector's keys. A key is
// pending (published, its first period not begun), active, retired (a
// later key is active; it still opens the reports of its periods) and
// deleted (its private half erased; its public half and its period stay
// in the schedule's history).
//
// Why the plan's epoch leaves the key schedule out (plan.EpochDigest), and
// why that is sound. The epoch is what reports pooled, opened, merged and
// accounted together must share. Its uses:
//
//   - the pool key pool#epoch#period: the shuffler pools and releases
//     reports of one epoch and period together, at least n_min of them;
//   - the binding (the HPKE info): metric, plugin, version, eps0, epoch
//     and period, so that a report opens only under the plan and period
//     it was randomized for. The epoch digest still covers every field
//     of the plan but the keys (categories, ranges, parameters, weights,
//     travel, period, grace), so this is unchanged: a report does not
//     open under another metric, eps0 or period;
//   - the statistics, merged per metric, epoch and period: of one
//     plugin, configuration and eps0, which the epoch still fixes;
//   - the guarantees: a batch's is the accountant's for its epoch's plan
//     (mechanism, eps0) at its number of valid reports, the horizon's
//     composes periods; neither reads the key;
//   - the app's staged values, draws and state runs, tagged with the
//     epoch digest: randomized at that epoch's eps0 whatever key seals
//     them. With the keys in the epoch, every rotation would drop the
//     values staged for the open period (superseded) and restart every
//     state run (a fresh memoized state, which the horizon's accounting
//     of one run per user does not cover).
//
// The key a report is sealed to changes who can open it, not what it
// says: a randomized report's distribution does not depend on the key.
// So a rotation needs no new epoch, and with none it splits no period's
// crowd across two epochs' pools. The key stays bound to the report:
// HPKE seals to the key's public half (its KEM binds the recipient key)
// and the HPKE info names the key's id (report.Seal), so a report sealed
// to one key opens under no other.
//
// Why a batch's reports are opened under one key, the same at every
// replica: the collector opens every report of a batch of period p with
// K(p), the key of the schedule with the latest start at or before p's
// start, chosen by the period in the batch's pool key and by nothing the
// report carries (the key id is inside the HPKE info, not in clear). So
// every report counted in a batch was sealed to K(p): the key is no label
// that could split the crowd the accountant counts. A report sealed to
// another key (an app whose schedule was stale) does not open and counts
// as malformed, like junk: its content is never read, it counts toward no
// estimate and no guarantee. K(p) never changes once p has begun: a key
// is added only with a start at least the lead (KeyLead, at least one
// period) after the clock of whoever adds it (but the first, from 0, and
// only to an empty schedule, when nothing can have been sealed), and the
// only key ever removed from the schedule is a pending one (rotate-key
// withdraws the pending key it replaces), whose start is after now; a
// batch of p reaches the collector only after p ended. (This assumes the
// clocks of the collectors and of whoever runs rotate-key agree to within
// the lead.) Changes to the schedule
// follow each other under the publication lock (PostgreSQL's advisory
// lock, SQLite's write lock), and an ingest reads the schedule from the
// store whenever its copy is more than a second old, so replicas agree
// on K(p). An app seals p, after p ended, by the schedule it fetched
// last: it holds K(p) when it fetched after K(p) was added, at least the
// lead before p began. With the SDK's hourly refresh and a lead of at
// least an hour, an app that fetches the plan on schedule holds K(p)
// when it seals p; one that could not fetch it for longer seals to the
// old key and its reports of the new key's periods count as malformed. The
// scheduled rotation publishes the next key a whole rotation interval
// before it is used (as soon as the key before it becomes active), so
// only an app without a plan fetch for that long misses it.
//
// When a retired key's private half is erased. Its last period ends at
// the start F of the key after it. An app seals a period's report until
// the plan's grace after the period's end (later it drops it), and the
// shuffler takes a period's reports until that deadline, then releases
// them all and forwards each batch until the collector acknowledges it.
// So every report sealed to the key reaches the collector by F + G + S,
// with G the longest grace of the plans the collector published (the
// shuffler run with them waits as long) and S the slack (KeySlack) the
// forwarding is given: a collector, or a shuffler, down past it loses
// the batches still sealed to the key. At F + G + S the key is erased
// (Run: the database row's private half set to NULL, or the key file
// unlinked); an ingest does not open with it from then on even before
// the erasure (replicas agree however their loops are timed). A later
// batch of its periods is acknowledged once, every report counted
// malformed, logged and counted in
// blanket_collector_reports_key_deleted_total: no crash, and no retry
// that no configuration could ever deliver. A shuffler run with a longer
// --period-grace than the plans' needs a longer slack.
//
// What erasure does not reach: copies made before (database dumps and
// WAL archives of a PostgreSQL store holding the private halves, file
// backups of the key directory, disk blocks and snapshots). With a key
// directory (KeyDir) the database holds public halves only, so its dumps
// hold no private key; see docs/operating.md.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Defaults of the key options (CollectorOptions).
const (
	// DefaultKeySlack is how long after a retired key's last deadline its
	// private half is kept for batches still on their way: a collector
	// or shuffler outage of a day around it loses nothing.
	DefaultKeySlack = 24 * time.Hour
	// DefaultKeyLead is the least time between a key's publication and
	// its first period, when the period is shorter: the SDK refreshes its
	// plan hourly (client.DefaultPlanRefresh).
	DefaultKeyLead = time.Hour
)

// legacyKeyFile is the one report key file of builds without a schedule.
const legacyKeyFile = "collector.key"

// ReportKeyFile returns the name of the file, in a key directory, that
// holds the private half of report key id (standard base64, mode 0600).
func ReportKeyFile(id string) string { return "report-" + id + ".key" }

// The states of a report key (ReportKey.State).
const (
	// KeyPending is a key published whose first period has not begun.
	KeyPending = "pending"
	// KeyActive is the key of the current period.
	KeyActive = "active"
	// KeyRetired is a key a later one replaced, still opening the late
	// reports of its own periods.
	KeyRetired = "retired"
	// KeyDeleted is a key whose private half was erased (or is past its
	// time): nothing opens with it any more.
	KeyDeleted = "deleted"
)

// Key errors.
var (
	// ErrKeyDeleted reports a period whose report key was erased: its
	// reports cannot be opened any more.
	ErrKeyDeleted = errors.New("collector: the report key of the period was deleted")
	// ErrKeyStore reports report keys kept in a way this collector cannot
	// use: a key file of an earlier build, private halves in another
	// place than KeyDir says, a missing private half.
	ErrKeyStore = errors.New("collector: report keys")
)

// ReportKey is one key of the collector's report key schedule.
type ReportKey struct {
	// ID is the key's id (report.KeyID).
	ID string `json:"id"`
	// Key is the public key, standard base64.
	Key string `json:"key"`
	// From is the start of the first period the key seals (the Unix
	// epoch for the collector's first key).
	From time.Time `json:"from"`
	// State is KeyPending, KeyActive, KeyRetired or KeyDeleted.
	State string `json:"state"`
	// Until is when its private half is erased (retired) or was
	// (deleted): its last period's end, plus the grace and the slack;
	// zero while no key follows it.
	Until time.Time `json:"until,omitzero"`
}

// keyRow is a stored key of the schedule.
type keyRow struct {
	id     string
	public []byte
	// from is the start of the first period the key seals (Unix
	// seconds); created when it was generated.
	from, created int64
	// deleted is when its private half was erased (Unix seconds), 0
	// while it is kept.
	deleted int64
	// private is the private half when the database keeps it: nil with
	// a key directory, and once erased.
	private []byte
}

// keyChange is a change of the stored schedule (store.changeKeys).
type keyChange struct {
	// add are new keys.
	add []keyRow
	// withdraw are pending keys removed from the schedule: none of their
	// periods has begun, so nothing was sealed to them.
	withdraw []string
	// erase are keys whose private half is erased at at (deleted set).
	erase []string
	at    int64
	// moveOut are keys whose private half leaves the database for the
	// key directory (written there first).
	moveOut []string
}

func (c keyChange) empty() bool {
	return len(c.add)+len(c.withdraw)+len(c.erase)+len(c.moveOut) == 0
}

// ringKey is a key of the schedule, parsed.
type ringKey struct {
	keyRow
	pub *report.PublicKey
	// priv is the private half: nil once erased, or when it could not be
	// read (privErr).
	priv    *report.PrivateKey
	privErr error
}

// keyRing is the schedule as a collector holds it, by start.
type keyRing struct {
	keys []*ringKey
	// loaded is when it was read from the store (wall clock).
	loaded time.Time
}

// forPeriod returns the index of the key that seals reports of p: the one
// with the latest start at or before p's start; -1 when there is none.
func (r *keyRing) forPeriod(p report.Period) int {
	for i := len(r.keys) - 1; i >= 0; i-- {
		if r.keys[i].from <= p.Start {
			return i
		}
	}
	return -1
}

// until returns when key i's private half is due to be erased: the start
// of the key after it plus retention; ok is false while none follows it,
// and when retention is negative (unknown: blanket collector rotate-key
// does not know the collector's grace and slack).
func (r *keyRing) until(i int, retention time.Duration) (int64, bool) {
	if i+1 >= len(r.keys) || retention < 0 {
		return 0, false
	}
	return r.keys[i+1].from + int64(retention/time.Second), true
}

// state returns key i's state at now: deleted when erased or past its
// erasure's time (an ingest opens nothing with it then).
func (r *keyRing) state(i int, now int64, retention time.Duration) string {
	k := r.keys[i]
	if until, ok := r.until(i, retention); k.deleted != 0 || ok && now >= until {
		return KeyDeleted
	}
	switch {
	case k.from > now:
		return KeyPending
	case i+1 < len(r.keys) && r.keys[i+1].from <= now:
		return KeyRetired
	}
	return KeyActive
}

// published returns the schedule entries of the plan at now: every key not
// deleted.
func (r *keyRing) published(now int64, retention time.Duration) []plan.CollectorKey {
	var out []plan.CollectorKey
	for i, k := range r.keys {
		if r.state(i, now, retention) != KeyDeleted {
			out = append(out, plan.NewCollectorKey(k.public, k.from))
		}
	}
	return out
}

// describe returns the schedule as ReportKeys at now.
func (r *keyRing) describe(now int64, retention time.Duration) []ReportKey {
	out := make([]ReportKey, len(r.keys))
	for i, k := range r.keys {
		out[i] = ReportKey{ID: k.id, Key: base64.StdEncoding.EncodeToString(k.public), From: time.Unix(k.from, 0).UTC(), State: r.state(i, now, retention)}
		if until, ok := r.until(i, retention); ok {
			out[i].Until = time.Unix(until, 0).UTC()
		}
		if k.deleted != 0 {
			out[i].Until = time.Unix(k.deleted, 0).UTC()
		}
	}
	return out
}

// keyFiles is a key directory: the private halves of report keys, one
// file each (ReportKeyFile).
type keyFiles struct{ dir string }

func (f keyFiles) path(id string) string { return filepath.Join(f.dir, ReportKeyFile(id)) }

// write creates id's file (mode 0600); one already there is an error.
func (f keyFiles) write(id string, priv []byte) error {
	created, err := secrets.Create(f.path(id), []byte(base64.StdEncoding.EncodeToString(priv)))
	if err != nil {
		return fmt.Errorf("%w: writing %s: %v", ErrKeyStore, f.path(id), err)
	}
	if !created {
		return fmt.Errorf("%w: %s exists already", ErrKeyStore, f.path(id))
	}
	return nil
}

// read returns the private half of key id.
func (f keyFiles) read(id string) ([]byte, error) {
	b, err := secrets.Read(f.path(id))
	if err != nil {
		return nil, err
	}
	raw, err := base64.StdEncoding.DecodeString(string(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not base64: %v", secrets.ErrSecretFile, f.path(id), err)
	}
	return raw, nil
}

// erase removes id's file; one already gone is no error.
func (f keyFiles) erase(id string) error {
	if err := secrets.Remove(f.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("collector: erasing %s: %w", f.path(id), err)
	}
	return nil
}

// keyKeeper keeps a collector's report keys: the schedule in its store,
// the private halves there or in a key directory.
type keyKeeper struct {
	st store
	// files is the key directory; nil keeps the private halves in the
	// database (PostgreSQL without KeyDir).
	files *keyFiles
	now   func() time.Time

	mu   sync.Mutex // one load at a time
	ring *keyRing   // the last loaded, under mu
}

// newKeyKeeper returns the keeper of st's keys with the private halves in
// keyDir ("" for the database).
func newKeyKeeper(st store, keyDir string, now func() time.Time) *keyKeeper {
	k := &keyKeeper{st: st, now: now}
	if keyDir != "" {
		k.files = &keyFiles{dir: keyDir}
	}
	return k
}

// check refuses what this build does not use: the key file of an earlier
// build, and private halves kept elsewhere than the keeper's place. With
// moveOut, private halves the database holds go to the key directory (a
// collector started with a key directory for the first time); without,
// they are refused (blanket collector rotate-key given a key directory
// the collector does not use).
func (k *keyKeeper) check(ctx context.Context, moveOut bool) error {
	if k.files != nil {
		if _, err := os.Stat(filepath.Join(k.files.dir, legacyKeyFile)); err == nil {
			return fmt.Errorf("%w: %s is the report key of an earlier build, which kept one key and no schedule; this build keeps report keys as %s with their schedule in the database and does not read it: move it and the collector's database aside to start afresh (reports sealed to it no longer open)",
				ErrKeyStore, filepath.Join(k.files.dir, legacyKeyFile), ReportKeyFile("<id>"))
		}
	}
	rows, err := k.st.reportKeys(ctx)
	if err != nil {
		return err
	}
	var inDB []string
	for _, r := range rows {
		switch {
		case r.deleted != 0:
		case r.private != nil:
			inDB = append(inDB, r.id)
		case k.files == nil:
			return fmt.Errorf("%w: the private half of report key %s is not in the database: the collector keeps its keys in a key directory (run with the same --key-dir)", ErrKeyStore, r.id)
		}
	}
	if len(inDB) == 0 || k.files == nil {
		return nil
	}
	if !moveOut {
		return fmt.Errorf("%w: the database holds the private halves of report keys %v, not the key directory %s: the collector runs without --key-dir", ErrKeyStore, inDB, k.files.dir)
	}
	return k.st.changeKeys(ctx, func(rows []keyRow) (keyChange, error) {
		var ch keyChange
		for _, r := range rows {
			if r.deleted != 0 || r.private == nil {
				continue
			}
			// A file of the same key left by a move that did not commit
			// is taken as it is.
			if err := k.files.write(r.id, r.private); err != nil {
				if had, rerr := k.files.read(r.id); rerr != nil || !bytes.Equal(had, r.private) {
					return keyChange{}, err
				}
			}
			ch.moveOut = append(ch.moveOut, r.id)
		}
		return ch, nil
	})
}

// load reads the schedule and the private halves of the keys not deleted
// (those of keys it read before are kept, not read again).
func (k *keyKeeper) load(ctx context.Context) (*keyRing, error) {
	rows, err := k.st.reportKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("collector: reading the report keys: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	known := map[string]*ringKey{}
	if k.ring != nil {
		for _, rk := range k.ring.keys {
			known[rk.id] = rk
		}
	}
	ring := &keyRing{loaded: time.Now()}
	for _, r := range rows {
		pub, err := report.ParsePublicKey(r.public)
		if err != nil {
			return nil, fmt.Errorf("%w: stored public key %s: %v", ErrKeyStore, r.id, err)
		}
		rk := &ringKey{keyRow: r, pub: pub}
		if r.deleted == 0 {
			if old := known[r.id]; old != nil && old.priv != nil {
				rk.priv = old.priv
			} else {
				rk.priv, rk.privErr = k.private(r)
			}
		}
		ring.keys = append(ring.keys, rk)
	}
	k.ring = ring
	return ring, nil
}

// private returns the private half of r, checked against its public half.
func (k *keyKeeper) private(r keyRow) (*report.PrivateKey, error) {
	raw := r.private
	if raw == nil {
		if k.files == nil {
			return nil, fmt.Errorf("%w: the database holds no private half of report key %s", ErrKeyStore, r.id)
		}
		var err error
		if raw, err = k.files.read(r.id); err != nil {
			return nil, fmt.Errorf("%w: report key %s: %w", ErrKeyStore, r.id, err)
		}
	}
	priv, err := report.ParsePrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: report key %s: %v", ErrKeyStore, r.id, err)
	}
	if priv.ID() != r.id {
		return nil, fmt.Errorf("%w: the private half stored for report key %s is of key %s", ErrKeyStore, r.id, priv.ID())
	}
	return priv, nil
}

// open readies the keys of a collector starting: it checks them (moving
// private halves out of the database into a new key directory), makes
// the first key at the first start, and loads them. The active key and
// the pending ones must have their private halves at hand.
func (k *keyKeeper) open(ctx context.Context, log *slog.Logger) error {
	if err := k.check(ctx, true); err != nil {
		return err
	}
	created, err := k.ensureFirst(ctx)
	if err != nil {
		return err
	}
	if created {
		log.Info("generated the collector's first report key")
	}
	ring, err := k.load(ctx)
	if err != nil {
		return err
	}
	now := k.now().Unix()
	for i, rk := range ring.keys {
		if st := ring.state(i, now, -1); rk.privErr != nil && (st == KeyActive || st == KeyPending) {
			return rk.privErr
		}
	}
	return nil
}

// held returns the schedule loaded last.
func (k *keyKeeper) held() *keyRing {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ring
}

// current returns the schedule, read again from the store when the copy
// held is older than maxAge.
func (k *keyKeeper) current(ctx context.Context, maxAge time.Duration) (*keyRing, error) {
	k.mu.Lock()
	ring := k.ring
	k.mu.Unlock()
	if ring != nil && time.Since(ring.loaded) < maxAge {
		return ring, nil
	}
	return k.load(ctx)
}

// newKey generates a key starting at from and writes its private half to
// the key directory, or into the row.
func (k *keyKeeper) newKey(from int64) (keyRow, error) {
	priv, pub, err := report.GenerateKey()
	if err != nil {
		return keyRow{}, fmt.Errorf("collector: generating a report key: %w", err)
	}
	r := keyRow{id: report.KeyID(pub), public: pub, from: from, created: k.now().Unix()}
	if k.files == nil {
		r.private = priv
		return r, nil
	}
	return r, k.files.write(r.id, priv)
}

// add adds the key decide asks for (a start; ok false: none) and
// withdraws the pending keys it names, in one change of the schedule.
// A key file written for a change that did not commit is removed.
func (k *keyKeeper) add(ctx context.Context, decide func(rows []keyRow, now int64) (from int64, withdraw []string, ok bool, err error)) (added *keyRow, withdrawn []string, err error) {
	err = k.st.changeKeys(ctx, func(rows []keyRow) (keyChange, error) {
		from, wd, ok, err := decide(rows, k.now().Unix())
		if err != nil || !ok {
			return keyChange{}, err
		}
		r, err := k.newKey(from)
		if err != nil {
			return keyChange{}, err
		}
		added, withdrawn = &r, wd
		return keyChange{add: []keyRow{r}, withdraw: wd}, nil
	})
	if err != nil {
		if added != nil && k.files != nil {
			k.files.erase(added.id)
		}
		return nil, nil, err
	}
	if k.files != nil {
		for _, id := range withdrawn {
			if err := k.files.erase(id); err != nil {
				return added, withdrawn, err
			}
		}
	}
	return added, withdrawn, nil
}

// ensureFirst makes the collector's first key (valid from the Unix
// epoch) when the schedule is empty, and reports whether it did.
func (k *keyKeeper) ensureFirst(ctx context.Context) (bool, error) {
	added, _, err := k.add(ctx, func(rows []keyRow, _ int64) (int64, []string, bool, error) {
		return 0, nil, len(rows) == 0, nil
	})
	return added != nil, err
}

// keyFrom returns the first period boundary (of period) at or after t.
func keyFrom(t int64, period time.Duration) int64 {
	sec := int64(period / time.Second)
	return (t + sec - 1) / sec * sec
}

// withinCap refuses a key that would make the plan's schedule longer than
// plan.MaxCollectorKeys: rows not deleted, less those withdrawn, plus one.
func withinCap(rows []keyRow, withdraw []string) error {
	n := 1
	for _, r := range rows {
		if r.deleted == 0 && !slices.Contains(withdraw, r.id) {
			n++
		}
	}
	if n > plan.MaxCollectorKeys {
		return fmt.Errorf("%w: %d report keys are held, the most a plan lists; wait until the oldest is deleted", ErrKeyStore, n-1)
	}
	return nil
}

// rotateNow schedules a new key from the first boundary of period at
// least lead after now, withdrawing the pending keys (which sealed
// nothing yet; were they leaked with the active one, keeping them would
// not help): blanket collector rotate-key.
func (k *keyKeeper) rotateNow(ctx context.Context, period, lead time.Duration) (*keyRow, []string, error) {
	return k.add(ctx, func(rows []keyRow, now int64) (int64, []string, bool, error) {
		if len(rows) == 0 {
			return 0, nil, false, fmt.Errorf("%w: no report key yet: the collector makes its first at its first start", ErrKeyStore)
		}
		var withdraw []string
		for _, r := range rows {
			if r.from > now {
				withdraw = append(withdraw, r.id)
			}
		}
		if err := withinCap(rows, withdraw); err != nil {
			return 0, nil, false, err
		}
		return keyFrom(now+int64(max(lead, period)/time.Second), period), withdraw, true, nil
	})
}

// rotateDue schedules the next key (KeyRotation every) unless one is
// pending: it is published as soon as the key before it is active, so
// that apps have a whole interval to fetch it, and starts at the first
// boundary of period at or after the active key's start plus every (and
// at least the lead from now).
func (k *keyKeeper) rotateDue(ctx context.Context, every, period, lead time.Duration) (*keyRow, error) {
	added, _, err := k.add(ctx, func(rows []keyRow, now int64) (int64, []string, bool, error) {
		var active *keyRow // the last key begun
		for i := range rows {
			if rows[i].from > now {
				return 0, nil, false, nil // the next key is published
			}
			active = &rows[i]
		}
		if active == nil {
			return 0, nil, false, nil
		}
		// The first key counts from its creation, not the Unix epoch.
		since := max(active.from, active.created)
		from := max(keyFrom(since+int64(every/time.Second), period), keyFrom(now+int64(max(lead, period)/time.Second), period))
		if err := withinCap(rows, nil); err != nil {
			return 0, nil, false, err
		}
		return from, nil, true, nil
	})
	return added, err
}

// eraseDue erases the private halves of the keys past their time (their
// successor's start plus retention), and removes the files of keys erased
// before (a crash between the two steps, or another replica's erasure).
// It returns the keys it erased.
func (k *keyKeeper) eraseDue(ctx context.Context, retention time.Duration) ([]string, error) {
	var erased []string
	err := k.st.changeKeys(ctx, func(rows []keyRow) (keyChange, error) {
		ring := &keyRing{}
		for _, r := range rows {
			ring.keys = append(ring.keys, &ringKey{keyRow: r})
		}
		now := k.now().Unix()
		ch := keyChange{at: now}
		for i, r := range rows {
			if until, ok := ring.until(i, retention); ok && r.deleted == 0 && now >= until {
				ch.erase = append(ch.erase, r.id)
			}
		}
		erased = ch.erase
		return ch, nil
	})
	if err != nil || k.files == nil {
		return erased, err
	}
	rows, err := k.st.reportKeys(ctx)
	if err != nil {
		return erased, err
	}
	for _, r := range rows {
		if r.deleted != 0 {
			if err := k.files.erase(r.id); err != nil {
				return erased, err
			}
		}
	}
	return erased, nil
}
