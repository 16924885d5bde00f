package declare

// Travel says how one user's metrics travel to the shuffler; the accountant
// composes the metrics' declarations accordingly (accountant.AllocatePlan).
type Travel string

// The travel modes of a plan.
const (
	// TravelJoint sends one message carrying every metric: the plan's
	// mechanism is the joint composition, and the total local budget is
	// split among the metrics in proportion to their weights.
	TravelJoint Travel = "joint"
	// TravelParallel has each user report one metric, chosen at random with
	// probability proportional to its weight: the plan's mechanism is the
	// parallel composition, every metric gets the whole local budget.
	TravelParallel Travel = "parallel"
	// TravelSeparate sends one message per metric, each shuffled in its own
	// batch. The per-user guarantee is the composition of every metric's
	// reports (heterogeneous, through privacy loss distributions); see
	// accountant.AllocatePlan for how the budgets are set.
	TravelSeparate Travel = "separate"
)
