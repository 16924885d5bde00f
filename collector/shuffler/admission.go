package shuffler

import (
	"errors"
	"fmt"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Reasons admit and the accept transaction give for envelopes refused
// for their admission token.
var (
	// errTokenMissing rejects an envelope without a token (or with the
	// zero token).
	errTokenMissing = errors.New("no admission token: this shuffler takes only envelopes with a token of their pool key (POST /v1/tokens to the issuer)")
	// errTokenForged rejects a token that is not one of the envelope's
	// pool key.
	errTokenForged = errors.New("the admission token is not one of this pool key: forged, of another pool or period, or issued under another seed than this shuffler's")
	// errSpent rejects an envelope whose token another envelope spent.
	errSpent = errors.New("its admission token was spent by another report")
)

// admit checks the admission token of e when the shuffler takes only
// envelopes with one (Options.Admission), and returns the key under
// which the token is recorded as spent (issuer.SpentKey), or why e is
// refused. Without Options.Admission it returns nil: every envelope is
// taken, its token ignored.
//
// Verifying costs one scalar multiplication and a hash to the group
// (about 60 µs, issuer.Verifier.Verify), on the upload's goroutine,
// before the commit; the spent check is the commit's (store.accept), in
// the transaction that stores the envelope.
func (s *Shuffler) admit(e report.Envelope) (spent []byte, why rejectReason, err error) {
	v := s.o.Admission
	if v == nil {
		return nil, 0, nil
	}
	if len(e.Token) == 0 {
		return nil, rejectTokenMissing, errTokenMissing
	}
	tok, err := admission.ParseToken(e.Token)
	if err != nil {
		return nil, rejectTokenInvalid, fmt.Errorf("the admission token does not decode: %w", err)
	}
	switch err := v.Verify(e.Metric, tok); {
	case errors.Is(err, issuer.ErrNoToken):
		return nil, rejectTokenMissing, errTokenMissing
	case err != nil:
		return nil, rejectTokenInvalid, errTokenForged
	}
	k := issuer.SpentKey(e.Metric, tok)
	return k[:], 0, nil
}
