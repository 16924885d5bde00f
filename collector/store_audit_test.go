//go:build audit

package collector

import (
	"testing"

	"github.com/blanket-dp/blanket/internal/servertest"
)

// TestStoreReplicasIngestSameBatchDeep is TestStoreReplicasIngestSameBatch
// over 150 rounds on PostgreSQL (40 on SQLite) of batches of 30 reports.
func TestStoreReplicasIngestSameBatchDeep(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) { storeSameBatch(t, kind, storeRounds(kind, 150), 30) })
	}
}

// TestStoreReplicasIngestDifferentBatchesDeep is
// TestStoreReplicasIngestDifferentBatches over 150 rounds on PostgreSQL
// (40 on SQLite) of batches of 30 reports.
func TestStoreReplicasIngestDifferentBatchesDeep(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) { storeDifferentBatches(t, kind, storeRounds(kind, 150), 30) })
	}
}

// TestStoreReplicasJointIngestDeep is TestStoreReplicasJointIngest over
// 150 rounds on PostgreSQL (40 on SQLite) of batches of 30 messages.
func TestStoreReplicasJointIngestDeep(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) { storeJointIngest(t, kind, storeRounds(kind, 150), 30) })
	}
}

// TestPGReplicasOpenTogetherDeep is TestPGReplicasOpenTogether five
// times, each on a new database.
func TestPGReplicasOpenTogetherDeep(t *testing.T) {
	for range 5 {
		pgOpenTogether(t)
	}
}
