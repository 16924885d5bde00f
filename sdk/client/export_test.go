package client

import (
	"context"
	"encoding/json"
)

// CachedPlanFile returns the plan cache file (planCacheFile) of a plan
// served as body with signature sig.
func CachedPlanFile(body []byte, sig string) []byte {
	b, err := json.Marshal(signedPlan{Plan: body, Signature: sig})
	if err != nil {
		panic(err)
	}
	return b
}

// Internals for the tests of package client_test.
var (
	Backoff         = backoff
	ParseRetryAfter = parseRetryAfter
	PlanCacheFile   = planCacheFile
)

// MaxRetryAfter is maxRetryAfter.
const MaxRetryAfter = maxRetryAfter

// DecodeAndVerifyPlan runs what NewProvider runs on the bytes the collector
// serves: decodePlan, then verifyPlan. Every error must wrap
// ErrPlanRefused or be ctx's.
func DecodeAndVerifyPlan(ctx context.Context, b []byte, maxEps0 float64, cache *RandomizerCache) error {
	p, err := decodePlan(b)
	if err != nil {
		return err
	}
	_, err = verifyPlan(ctx, p, maxEps0, cache)
	return err
}
