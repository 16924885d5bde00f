package main

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// This file is --max-fake-fraction of the account commands: the plan's
// max_fake_fraction on the command line (docs/accounting.md §11).

// fakeRule is the domain of --max-fake-fraction.
var fakeRule = floatRule{"a number in [0, 1)", declare.ValidFakeFraction}

// fakesHelp documents --max-fake-fraction.
const fakesHelp = `--max-fake-fraction F (every command, default 0) assumes that at most a
fraction F of the n reports of a batch (and of --users) are fake: sent with
bought or stolen credentials, their values known to the adversary. Every bound
is then computed for the honest floor n - floor(F n), as for a plan's
max_fake_fraction (--n 10000 at F = 0.1 is accounted as 9000), and the output
adds max_fake_fraction and honest_n (JSON keys, CSV columns after n, table
rows; a tree protocol's longitudinal object adds honest_users with --users).`

// fakeUsage is the usage of --max-fake-fraction.
const fakeUsage = "the largest fraction f of the n reports (and of --users) that may be fake: sent with bought or stolen credentials, known to the adversary. Every bound is computed for the honest floor n - floor(f n), as a plan's max_fake_fraction is; " +
	"a number in [0, 1) (default 0: every report honest)"

// fakeFlag is --max-fake-fraction.
type fakeFlag struct{ floatValue }

func newFakeFlag() *fakeFlag { return &fakeFlag{floatValue{rule: fakeRule}} }

func (f *fakeFlag) add(cmd *cobra.Command) {
	cmd.Flags().Var(&f.floatValue, "max-fake-fraction", fakeUsage)
}

// honest returns the honest floor of n reports (declare.HonestFloor): n
// without the flag, 0 for 0 (no --users).
func (f *fakeFlag) honest(n int) int { return declare.HonestFloor(n, f.v) }

// assumption returns what a report of n reports says of the flag: nothing
// at 0.
func (f *fakeFlag) assumption(n int) fakeAssumption {
	if f.v == 0 {
		return fakeAssumption{}
	}
	return fakeAssumption{MaxFakeFraction: f.v, HonestN: f.honest(n)}
}

// mark records the flag in a report computed for the honest floor of n
// reports (and of users for a tree protocol's parts l, when not nil): its
// n as given (*reportN), the assumption (*a), and l's users as given with
// their honest floor.
func (f *fakeFlag) mark(reportN *int, a *fakeAssumption, n int, l *longitudinalParts, users int) {
	*reportN, *a = n, f.assumption(n)
	if l != nil && f.v > 0 {
		l.Users, l.HonestUsers = users, f.honest(users)
	}
}

// fakeAssumption is what --max-fake-fraction adds to a report: the
// fraction, and the honest floor of its n, the count every bound is
// computed for (both omitted without the flag).
type fakeAssumption struct {
	MaxFakeFraction float64 `json:"max_fake_fraction,omitempty"`
	HonestN         int     `json:"honest_n,omitempty"`
}

// rows adds the assumption to a table, after its n.
func (a fakeAssumption) rows(t *table) {
	if a.MaxFakeFraction == 0 {
		return
	}
	t.row("max fake fraction", fmtNum(a.MaxFakeFraction))
	t.row("honest n", strconv.Itoa(a.HonestN)+" (the bounds' n)")
}
