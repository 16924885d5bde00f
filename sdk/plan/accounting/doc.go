// Package accounting joins privacy plans (package plan) to the accountant:
// Calibrate sets every metric's local budget eps0 so that a plan meets its
// target per user over its horizon, and BatchMechanism and
// ParallelMechanism give the mechanism whose central guarantee a shuffled
// batch of a calibrated plan has (HonestParallelMechanism when some of a
// parallel batch's messages may be fake: plan.Plan.MaxFakeFraction). The
// collector and the CLI call it; an app never does (package plan alone
// links no accountant).
//
//	p, err := plan.Load("plan.yaml")
//	err = accounting.Calibrate(ctx, p, open) // fills Eps0 and Guarantee
//	mech, eps0, delta, err := accounting.BatchMechanism(ctx, p, open, "ui/screen")
//	r, err := accountant.Epsilon(mech, eps0, batchSize, delta)
package accounting
