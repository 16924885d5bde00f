package collector

import (
	"fmt"

	"github.com/blanket-dp/blanket/admission"
)

// Scope says against whom the guarantees the collector states hold
// (docs/threat-model.md). The central (eps, delta) of a batch, and the
// horizon's, are proven for the batch's reports as the shuffler released
// them; they hold against the collector and anyone reading the estimates
// only while the shuffler is honest and the other reports of a batch are
// honest devices' reports. A party that runs the shuffler and the
// collector together can link every report to its sender: against it only
// each report's local eps0 holds.
type Scope struct {
	// Against names who the central guarantee holds against.
	Against string `json:"against"`
	// Provided lists what the central guarantee assumes.
	Provided []string `json:"provided"`
	// LocalOnly names who only each report's local eps0 holds against.
	LocalOnly string `json:"local_only"`
	// SameOperator reports that this process runs the shuffler too
	// (blanket serve): its operator is then a party LocalOnly names.
	SameOperator bool `json:"same_operator"`
	// Admission says what keeps fake reports out of the batches, as
	// CollectorOptions.ShufflerAdmission declares it: "tokens" (each
	// report carried an admission token, one per authenticated app
	// instance, pool and period) or "open" (nothing: anyone who can reach
	// the shuffler's upload port can add reports).
	Admission string `json:"admission"`
	// Doc names the threat model.
	Doc string `json:"doc"`
}

// Scope texts, shared by the API and the dashboard.
const (
	scopeAgainst   = "the collector and anyone reading the published estimates"
	scopeLocalOnly = "a shuffler and a collector run by one party, or colluding: only each report's local eps0 holds against them"
	scopeShuffler  = "the shuffler is honest: it keeps no sender, shuffles with crypto randomness, and adds or holds back no report"
	scopeHonest    = "the other reports of each batch come from honest devices running the plan's randomizer"
	scopeFakesFmt  = "at most a fraction %g of each batch's valid reports is fake (the plan's max_fake_fraction), and the rest come from honest devices running the plan's randomizer: every guarantee counts only that honest floor"
	scopeNoAdmit   = "nothing checks that: anyone who can reach the shuffler's upload port can add reports to a batch and weaken it"
	scopeTokens    = "each report in a batch carried an admission token: one per authenticated app instance, pool and period, so fake reports need stolen or bought credentials, at most one per credential per pool and period"
	scopeSameOp    = "this server runs the shuffler and the collector together: against its operator only each report's local eps0 holds"
)

// scope returns the collector's Scope.
func (c *Collector) scope() Scope {
	s := Scope{
		Against:      scopeAgainst,
		Provided:     []string{scopeShuffler, scopeHonest, scopeNoAdmit},
		LocalOnly:    scopeLocalOnly,
		SameOperator: c.o.SameOperator,
		Admission:    admission.AdmissionOpen,
		Doc:          "docs/threat-model.md",
	}
	if c.o.ShufflerAdmission == admission.AdmissionTokens {
		s.Admission, s.Provided[2] = admission.AdmissionTokens, scopeTokens
	}
	if f := c.plan.MaxFakeFraction; f > 0 {
		s.Provided[1] = fmt.Sprintf(scopeFakesFmt, f)
	}
	if c.o.SameOperator {
		s.Provided = append(s.Provided, scopeSameOp)
	}
	return s
}
