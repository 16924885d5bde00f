package collector

import (
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// PeriodSpan is a reporting period in the JSON API: [Start, End) in UTC.
type PeriodSpan struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// newPeriodSpan returns p's span, nil for the zero period (reports sealed
// before periods existed).
func newPeriodSpan(p report.Period) *PeriodSpan {
	if p.IsZero() {
		return nil
	}
	return &PeriodSpan{Start: time.Unix(p.Start, 0).UTC(), End: time.Unix(p.End(), 0).UTC()}
}
