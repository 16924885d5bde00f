package shuffler

import (
	"context"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// store is where a shuffler keeps its state: sqliteStore, the embedded
// default for one process, or pgStore, shared by replicas on one
// PostgreSQL database. Every method that writes commits before it
// returns; what it returns is committed.
type store interface {
	// salt returns the key of the id hashes (created on first use; every
	// replica of a database shares it, so that a retry to another
	// replica is a duplicate too).
	salt(ctx context.Context) ([]byte, error)
	// learned returns the pools and period lengths stored by learn.
	learned(ctx context.Context) (pools []string, lengths []int64, err error)
	// learn stores pools and period lengths (Shuffler.AddPlan).
	learn(ctx context.Context, pools []string, lengths []int64) error
	// forgotten returns, per period length, the latest end of a closed
	// period: one some of whose ids were forgotten, or closed by
	// closePeriod. Every period of that length ending then or earlier is
	// refused.
	forgotten(ctx context.Context) (map[int64]int64, error)
	// accept commits a group of uploads in one transaction: each item
	// whose id hash is new is remembered and its report pooled; an item
	// of a closed period is refused (acceptRes.late), checked inside the
	// transaction so that no accept commits a report of a period after
	// closePeriod of it returned (release.go). It reports whether the
	// closed periods changed.
	accept(ctx context.Context, group []*acceptReq) ([]acceptRes, bool, error)
	// closePeriod records p as closed (in forgotten) and returns once
	// every accept that may pool a report of p has ended: after it
	// returns, no report of p is pooled any more. It may give up with
	// errPeriodBusy (PostgreSQL: an accept of p held on for long), and
	// then records nothing: the caller tries again later.
	closePeriod(ctx context.Context, p report.Period) error
	// setGrace raises the grace (seconds) the store's own retention
	// counts with, when it keeps one (the SQLite store forgets ids as it
	// accepts; the PostgreSQL store is given the grace at each forget).
	setGrace(g int64)
	// forget forgets the ids of periods past their deadline (the
	// PostgreSQL store; SQLite forgets by generation inside accept), and
	// reports whether the forgotten periods changed.
	forget(ctx context.Context, now, grace int64) (bool, error)
	// poolSizes returns the reports pooled per pool key and suite.
	poolSizes(ctx context.Context) ([]poolSize, error)
	// expire deletes the reports of a pool if it holds fewer than nMin
	// (counted under the pool's lock) and returns how many it deleted.
	expire(ctx context.Context, key string, suite uint16, nMin int) (int64, error)
	// release moves the oldest reports of a pool into one outgoing batch,
	// in one transaction: with c reports pooled (counted under the pool's
	// lock), batchSize(c, nMin, keep, maxBatch) of them, so that at least
	// keep stay pooled; it returns 0 (and changes nothing) when that is
	// none, or when another replica is releasing the pool. seal turns the
	// reports into the batch (shuffling them) and returns its id and body.
	release(ctx context.Context, key string, suite uint16, nMin, keep, maxBatch int, seal func(sealed [][]byte) (report.ID, []byte)) (int, error)
	// outgoing lists the released batches not yet acknowledged, oldest
	// first.
	outgoing(ctx context.Context) ([]outgoingBatch, error)
	// claim returns the body of outgoing batch id for this process to
	// send, under a lease of lease seconds that this process may renew
	// or claim again; a replica that dies leaves the batch to the others
	// once the lease ends. It returns a nil body when the batch is gone,
	// or is leased by another replica until busyUntil.
	claim(ctx context.Context, id report.ID, lease int64) (body []byte, busyUntil time.Time, err error)
	// renew extends this process's lease of outgoing batch id to lease
	// seconds from now.
	renew(ctx context.Context, id report.ID, lease int64) error
	// acknowledged deletes outgoing batch id.
	acknowledged(ctx context.Context, id report.ID) error
	// outgoingCount returns the number of outgoing batches.
	outgoingCount(ctx context.Context) (int64, error)
	// oldestOutgoing returns how long ago the oldest outgoing batch was
	// released (by the store's clock: the database's on PostgreSQL), and
	// false when there is none.
	oldestOutgoing(ctx context.Context) (time.Duration, bool, error)
	// ready returns nil when the store takes reads and writes.
	ready(ctx context.Context) error
	// close releases the store.
	close() error
}
