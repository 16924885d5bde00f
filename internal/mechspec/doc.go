// Package mechspec parses the --mech grammar of the blanket CLI into
// accountant mechanisms.
//
// A spec names a local randomizer and how it is composed:
//
//	krr:k=100                          k-ary randomized response
//	krr:k=10:eps0=1.5                  ... with its own local budget
//	generic                            any pure eps0-LDP randomizer
//	generic:eps0=2
//	matrix:FILE.json                   a declaration read from a file
//	joint(krr:k=10,krr:k=10)           one message carries every component
//	parallel(0.5:krr:k=10,0.5:krr:k=20) each user reports one component
//	subsample(0.1,krr:k=10)            each user reports with probability 0.1
//	longitudinal:tree=64               a plugin (here the tree protocol over
//	                                   trees of 64 periods), when registered
//
// Combinators nest to any depth up to MaxDepth. The grammar, in EBNF:
//
//	spec      = mech .
//	mech      = joint | parallel | subsample | leaf .
//	joint     = "joint" "(" mech { "," mech } ")" .
//	parallel  = "parallel" "(" number ":" mech { "," number ":" mech } ")" .
//	subsample = "subsample" "(" number "," mech ")" .
//	leaf      = name { ":" param } .
//	param     = key "=" value | value .
//	name, key = letter { letter | digit | "_" | "-" } .
//	value     = bare | quoted .
//
// A bare value is a run of characters other than white space, control
// characters and , ( ) : = " ; a quoted value is a Go double-quoted string
// ("C:\\data\\m.json"), for values that contain those characters. White
// space is allowed between tokens.
//
// The total local budget eps0 given to a mechanism is split evenly among the
// components of joint, except components that fix their own (eps0=...);
// every component of parallel and subsample gets all of it
// (accountant.JointMech implements the split).
//
// A longitudinal tree protocol (a plugin or matrix file whose declaration
// has a tree, see accountant.Longitudinal) sends reports that are not
// independent across periods: it is accounted alone, and Parse refuses it
// as a component of a combinator with an error wrapping
// accountant.ErrLongitudinal.
//
// Leaf names are looked up in a Registry. NewRegistry registers krr, generic
// and matrix; a plugin host registers more with Register or RegisterPlugins:
//
//	r := mechspec.NewRegistry()
//	m, err := r.Parse("joint(krr:k=10,generic:eps0=1)")
//
// Errors are *Error values that give the byte offset (0-based) in the spec
// and what was expected there, e.g.
//
//	mechspec: at 15 in "joint(krr:k=10,": expected mechanism name, got end of input
package mechspec
