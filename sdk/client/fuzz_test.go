package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/report"
)

// FuzzPlan feeds the plan decoder and verifier arbitrary bytes, as a
// collector (or whoever answers in its place) may serve: they must never
// panic, and every refusal must wrap ErrPlanRefused.
func FuzzPlan(f *testing.F) {
	_, pub, err := report.GenerateKey()
	if err != nil {
		f.Fatal(err)
	}
	good, err := json.Marshal(testPlan(pub))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":1,"target":{"eps":1,"delta":1e-6},"n_min":10,"metrics":[{"name":"a","plugin":"krr","categories":["x","y"],"eps0":1,"version":"1"}],"guarantee":{"eps":1,"delta":1e-6,"rule":"r"},"collector_key":"AAAA"}`))
	f.Add([]byte(`null`))
	cache := client.NewRandomizerCache(nil)
	f.Cleanup(func() { cache.Close() })
	f.Fuzz(func(t *testing.T, b []byte) {
		err := client.DecodeAndVerifyPlan(context.Background(), b, 8, cache)
		if err != nil && !errors.Is(err, client.ErrPlanRefused) {
			t.Fatalf("error does not wrap ErrPlanRefused: %v", err)
		}
	})
}
