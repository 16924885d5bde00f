// Package loadtest is make loadtest: it pushes a million reports (LOAD_N)
// through real blanket processes, on SQLite (one blanket serve) and on
// PostgreSQL with 1, 2 and 4 replicas of each role (LOAD_CONFIGS), and
// prints per configuration the end-to-end throughput (reports ingested by
// the collectors per second from the first upload), the upload throughput
// and latency (p50, p99), and per process its peak resident set (VmHWM)
// and CPU time per thousand reports, so that the cost of each role can be
// read off and a deployment sized (README, "Running past one machine").
//
// The apps are simulated by one process: LOAD_CONNS connections upload
// envelopes of LOAD_PER reports each, spread over the shufflers, every
// envelope with a fresh id and one of 4096 reports sealed once (sealing is
// the apps' cost, not the servers'; the collector opens every report
// anyway). The plan has one k-RR metric over 20 categories, n_min =
// 10,000, calibrated once. PostgreSQL runs from Debian's package
// (internal/pgtest) with its default durability: every commit is synced,
// as SQLite's are.
//
// The test is behind the build tag loadtest:
//
//	go test -tags loadtest -run TestLoad -v -timeout 2h ./examples/loadtest
package loadtest
