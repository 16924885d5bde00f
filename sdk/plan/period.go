package plan

import (
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// DefaultPeriod is the period of a plan that sets none.
const DefaultPeriod = 24 * time.Hour

// MinPeriod and MaxPeriod bound a plan's period.
const (
	MinPeriod = time.Second
	MaxPeriod = 366 * 24 * time.Hour
)

// DefaultGrace is the grace, in periods, of a plan that sets none: with
// daily periods, an app opened once a week still sends the report of the
// day it was last used at its next start.
const DefaultGrace = 8

// MaxGrace bounds a plan's grace (Grace periods).
const MaxGrace = 400 * 24 * time.Hour

// GraceLength returns how long after a period ends its report may still
// be sealed, sent and pooled: Grace (DefaultGrace when unset) periods.
func (p *Plan) GraceLength() time.Duration {
	g := p.Grace
	if g <= 0 {
		g = DefaultGrace
	}
	per := p.PeriodLength()
	if time.Duration(g) > MaxGrace/per { // an unvalidated plan: no overflow
		return max(MaxGrace, per)
	}
	return time.Duration(g) * per
}

// PeriodLength returns the plan's period (DefaultPeriod when unset).
func (p *Plan) PeriodLength() time.Duration {
	if p.Period == "" {
		return DefaultPeriod // without the error ParseDuration allocates: a Record calls this
	}
	if d, err := time.ParseDuration(p.Period); err == nil && d > 0 {
		return d
	}
	return DefaultPeriod
}

// HorizonPeriods returns the number of periods the target covers (1 when
// unset).
func (p *Plan) HorizonPeriods() int { return max(p.Horizon, 1) }

// PeriodOf returns the index of the period holding t: floor(t / period)
// since the Unix epoch.
func (p *Plan) PeriodOf(t time.Time) int64 {
	d := p.PeriodLength()
	ns := t.UnixNano()
	i := ns / int64(d)
	if ns%int64(d) < 0 {
		i--
	}
	return i
}

// PeriodStart returns the start of period i (UTC); period i ends where
// period i+1 starts.
func (p *Plan) PeriodStart(i int64) time.Time {
	return time.Unix(0, i*int64(p.PeriodLength())).UTC()
}

// ReportPeriod returns the wire form of the period holding t (its start
// and length in Unix seconds), which reports are bound to and pooled by.
func (p *Plan) ReportPeriod(t time.Time) report.Period {
	sec := int64(p.PeriodLength() / time.Second)
	return report.Period{Start: p.PeriodOf(t) * sec, Length: sec}
}
