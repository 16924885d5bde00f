// Package chaos holds end-to-end tests of Blanket under faults, as an
// operator and an app developer would meet them (issue 23, items 4 and 8):
// real `blanket serve` processes on real SQLite files in a data directory,
// SIGKILLed and restarted on it, and apps on the SDK (sdk/client), each
// with its own SQLite outbox, reporting over loopback HTTP on the real
// clock with a reporting period of a few seconds.
//
//   - chaos_test.go: long-running apps record over several periods while
//     the server is SIGKILLed at period boundaries and right after it
//     released a batch, before it forwarded it; every report an app's
//     ledger says the shuffler acknowledged must be counted by the
//     collector once, in its period.
//   - cli_test.go: a short-lived tool (clitool, a real process: a fresh
//     Provider each run) run once per simulated day per user, some users
//     skipping days, the server down for a few days; every report recorded
//     within the plan's grace must be counted, and a run against the dead
//     server must cost little.
//
// The small versions run in make test; the deep ones (*_audit_test.go,
// build tag audit) in make audit. The package has no code besides its
// tests and clitool.
package chaos
