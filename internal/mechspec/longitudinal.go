package mechspec

import (
	"fmt"

	"github.com/blanket-dp/blanket/accountant"
)

// This file holds what the grammar knows about longitudinal tree protocols
// (accountant.Longitudinal): the parameters of the longitudinal plugin,
// matrix files that declare a tree, and the rule that a tree protocol is
// accounted alone, never as a component of a combinator.

// longitudinalName is the name of the tree protocol's plugin
// (plugins/longitudinal).
const longitudinalName = "longitudinal"

// longitudinalParam returns the parameter key ("tree" or "changes") of the
// longitudinal plugin, checked against the rules the grammar knows: tree a
// power of two in [1, accountant.MaxTree], changes at least 1. The plugin
// checks its own bounds besides (its largest tree, at most tree changes).
func longitudinalParam(p Params, key string) (int, error) {
	v, err := p.Int(key)
	if err != nil {
		return 0, err
	}
	switch key {
	case "tree":
		if v < 1 || v > accountant.MaxTree || v&(v-1) != 0 {
			return 0, p.Invalid(key, fmt.Sprintf("a power of two in [1, %d] (the periods per tree)", accountant.MaxTree))
		}
	case "changes":
		if v < 1 {
			return 0, p.Invalid(key, ">= 1 (the changes per tree the estimates follow)")
		}
	}
	return v, nil
}

// refuseLongitudinal returns an error pointing at pos when m, a component
// of the combinator, is a longitudinal tree protocol: its reports are not
// independent across periods, and every combinator assumes they are. An
// error asking m for its declaration is left for the accountant to report
// when the mechanism is used.
func (p *parser) refuseLongitudinal(m accountant.Mechanism, combinator string, pos int) error {
	// What accountant.IsLongitudinal asks, without its panic on a FuncMech
	// that has no Declare.
	eps0, fixed := m.FixedEps0()
	if !fixed {
		eps0 = 1
	}
	if _, ok, err := accountant.LongitudinalOf(m, eps0); err != nil || !ok {
		return nil
	}
	return &Error{Spec: p.spec, Pos: pos, Kind: ErrParam, Cause: accountant.ErrLongitudinal,
		Msg: fmt.Sprintf("%s: %s is a longitudinal tree protocol, whose reports are not independent across periods, so it cannot be a component of joint, parallel or subsample; account for it alone", combinator, m)}
}

// decomposeDeclaration validates a declaration read from a file and
// returns its decomposition: the node's, for a longitudinal declaration
// (Tree > 0), which must also be the 3-row matrix accountant.Longitudinal
// accounts for.
func decomposeDeclaration(d *accountant.Declaration) (*accountant.Decomposition, error) {
	if d.Tree == 0 {
		return accountant.Decompose(d)
	}
	node, err := d.Node()
	if err != nil {
		return nil, err
	}
	dec, err := accountant.Decompose(node)
	if err != nil {
		return nil, err
	}
	// The eps0 argument is ignored: a declaration fixes its own.
	if _, _, err := accountant.LongitudinalOf(accountant.DeclaredMech{Decl: d}, dec.LocalEps); err != nil {
		return nil, err
	}
	return dec, nil
}
