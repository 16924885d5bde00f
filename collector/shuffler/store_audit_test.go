//go:build audit

package shuffler

import (
	"testing"

	"github.com/blanket-dp/blanket/internal/servertest"
)

// TestStoreReplicasDedupSameIDsDeep is TestStoreReplicasDedupSameIDs
// over 400 rounds of 50 envelopes.
func TestStoreReplicasDedupSameIDsDeep(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) { dedupSameIDs(t, kind, 400, 50) })
	}
}

// TestStoreReplicasReleaseDeep is TestStoreReplicasRelease over 400
// rounds.
func TestStoreReplicasReleaseDeep(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) { replicasRelease(t, kind, 400) })
	}
}

// TestPGForgetRacesRetriesDeep is TestPGForgetRacesRetries over 2000
// rounds.
func TestPGForgetRacesRetriesDeep(t *testing.T) { forgetRacesRetries(t, 2000) }

// TestPGExpireRacesAcceptDeep is TestPGExpireRacesAccept over 1000
// rounds.
func TestPGExpireRacesAcceptDeep(t *testing.T) { expireRacesAccept(t, 1000) }

// TestStoreReplicasSpendOnceDeep is TestStoreReplicasSpendOnce over 200
// rounds of 20 tokens of each kind.
func TestStoreReplicasSpendOnceDeep(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) { spendOnce(t, kind, 200, 20) })
	}
}
