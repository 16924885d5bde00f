package plan

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/blanket-dp/blanket/sdk/report"
)

// The collector's report key schedule. The collector seals nothing; apps
// seal each period's report to the collector's HPKE key valid for that
// period, and the collector rotates that key: the plan it publishes lists
// every key whose private half it still holds, each with the first
// reporting period it seals, so that an app knows the next key before it
// is used and seals a period that closed late with its own period's key.
// The schedule is outside the plan's epoch (EpochDigest): a rotation
// publishes a new plan body, never a new epoch, so that it splits no
// period's crowd (collector/keys.go argues why that is sound).

// MaxCollectorKeys bounds the keys of a plan's schedule.
const MaxCollectorKeys = 64

// ErrBadKeySchedule reports a plan whose collector key schedule is
// missing or malformed.
var ErrBadKeySchedule = errors.New("plan: bad collector key schedule")

// CollectorKey is one key of the collector's report key schedule
// (Plan.CollectorKeys).
type CollectorKey struct {
	// ID is the key's id: report.KeyID of the key's bytes.
	ID string `yaml:"id" json:"id"`
	// Key is the collector's HPKE public key, standard base64.
	Key string `yaml:"key" json:"key"`
	// From is the start (Unix seconds) of the first reporting period the
	// key seals: a report of period p is sealed to the key with the
	// latest From at or before p's start. The collector's first key has
	// From 0.
	From int64 `yaml:"from" json:"from"`
}

// NewCollectorKey returns the schedule entry of public key pub (its
// bytes) used from the period starting at from (Unix seconds).
func NewCollectorKey(pub []byte, from int64) CollectorKey {
	return CollectorKey{ID: report.KeyID(pub), Key: base64.StdEncoding.EncodeToString(pub), From: from}
}

// ScheduledKey is a parsed entry of a key schedule.
type ScheduledKey struct {
	// ID is the key's id (report.KeyID).
	ID string
	// Key is the public key.
	Key *report.PublicKey
	// From is the start of the first period the key seals (Unix seconds).
	From int64
}

// KeySchedule is a plan's parsed key schedule, by From, strictly
// increasing.
type KeySchedule []ScheduledKey

// KeySchedule parses and checks the plan's CollectorKeys: at least one
// and at most MaxCollectorKeys keys, each a valid public key whose ID is
// its report.KeyID, no key twice, From non-negative and strictly
// increasing. Errors wrap ErrBadKeySchedule and name the entry. Validate
// does not check the schedule (a plan file has none; the collector adds
// it when publishing): whoever seals by it calls KeySchedule.
func (p *Plan) KeySchedule() (KeySchedule, error) {
	bad := func(format string, args ...any) (KeySchedule, error) {
		return nil, fmt.Errorf("%w: %s", ErrBadKeySchedule, fmt.Sprintf(format, args...))
	}
	switch n := len(p.CollectorKeys); {
	case n == 0:
		return bad("collector_keys is empty")
	case n > MaxCollectorKeys:
		return bad("collector_keys has %d keys, at most %d", n, MaxCollectorKeys)
	}
	out := make(KeySchedule, 0, len(p.CollectorKeys))
	seen := map[string]bool{}
	for i, k := range p.CollectorKeys {
		raw, err := base64.StdEncoding.DecodeString(k.Key)
		if err != nil {
			return bad("collector_keys[%d].key is not standard base64: %v", i, err)
		}
		pub, err := report.ParsePublicKey(raw)
		if err != nil {
			return bad("collector_keys[%d].key: %v", i, err)
		}
		switch {
		case k.ID != pub.ID():
			return bad("collector_keys[%d].id = %q, the key's id is %q", i, k.ID, pub.ID())
		case seen[k.ID]:
			return bad("collector_keys[%d]: key %s appears twice", i, k.ID)
		case k.From < 0:
			return bad("collector_keys[%d].from = %d, must be >= 0", i, k.From)
		case i > 0 && k.From <= p.CollectorKeys[i-1].From:
			return bad("collector_keys[%d].from = %d, must be after the previous key's %d", i, k.From, p.CollectorKeys[i-1].From)
		}
		seen[k.ID] = true
		out = append(out, ScheduledKey{ID: k.ID, Key: pub, From: k.From})
	}
	return out, nil
}

// For returns the key that seals reports of period: the one with the
// latest From at or before the period's start. It reports false when
// every key starts after the period (the keys that sealed it are gone
// from the schedule).
func (s KeySchedule) For(period report.Period) (ScheduledKey, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i].From <= period.Start {
			return s[i], true
		}
	}
	return ScheduledKey{}, false
}
