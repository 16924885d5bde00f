package admission

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/oprf"
)

// client is the base-mode OPRF client (stateless).
var client = oprf.NewClient(oprf.SuiteRistretto255)

// blindDST separates the hash that turns random bytes into a blind.
var blindDST = []byte("blanket admission blind v1")

// Pending is the client's side of one token request, from Blind to
// Finalize: per pool key, the input and the blind. Persist it
// (MarshalBinary) before sending its request, and after a crash send the
// same request again (ParsePending, then Request): the issuer answers a
// repeated blinded element with the same evaluation, and refuses a new
// one for a pool key it granted. It is secret: with it, the tokens it
// yields can be linked to the request, which names the instance.
type Pending struct {
	items []pendingItem
}

// pendingItem is one pool key's state.
type pendingItem struct {
	pool    string
	input   []byte // InputSize bytes
	blind   group.Scalar
	blinded []byte // the encoded blinded element
	fin     *oprf.FinalizeData
}

// Blind draws, for each pool key, a random input and a random blind and
// returns the pending state and the request to send (its Requests in the
// order of poolKeys). It refuses no pool key or more than MaxRequests
// (ErrCount), a pool key twice (ErrDuplicate) and a pool key that
// CheckPoolKey refuses (ErrMalformed).
func Blind(poolKeys []string) (*Pending, *TokenRequest, error) {
	return blind(rand.Reader, poolKeys)
}

// blind is Blind with the randomness rnd.
func blind(rnd io.Reader, poolKeys []string) (*Pending, *TokenRequest, error) {
	if err := checkPools(poolKeys); err != nil {
		return nil, nil, err
	}
	p := &Pending{items: make([]pendingItem, len(poolKeys))}
	for i, pool := range poolKeys {
		input := make([]byte, InputSize)
		if _, err := io.ReadFull(rnd, input); err != nil {
			return nil, nil, fmt.Errorf("admission: drawing an input: %w", err)
		}
		r, err := drawBlind(rnd)
		if err != nil {
			return nil, nil, err
		}
		if p.items[i], err = newItem(pool, input, r); err != nil {
			return nil, nil, err
		}
	}
	return p, p.Request(), nil
}

// checkPools checks the pool keys of one request.
func checkPools(poolKeys []string) error {
	if len(poolKeys) == 0 || len(poolKeys) > MaxRequests {
		return fmt.Errorf("%w: %d pool keys, want 1 to %d", ErrCount, len(poolKeys), MaxRequests)
	}
	seen := make(map[string]bool, len(poolKeys))
	for _, pool := range poolKeys {
		if _, err := CheckPoolKey(pool); err != nil {
			return err
		}
		if seen[pool] {
			return fmt.Errorf("%w: %q", ErrDuplicate, pool)
		}
		seen[pool] = true
	}
	return nil
}

// drawBlind returns a uniform non-zero scalar made from 64 bytes of rnd
// (HashToScalar: statistically uniform, the bias below 2^-250).
func drawBlind(rnd io.Reader) (group.Scalar, error) {
	var b [64]byte
	for {
		if _, err := io.ReadFull(rnd, b[:]); err != nil {
			return nil, fmt.Errorf("admission: drawing a blind: %w", err)
		}
		if r := group.Ristretto255.HashToScalar(b[:], blindDST); !r.IsZero() {
			return r, nil
		}
	}
}

// newItem blinds input with r (DeterministicBlind, also the rebuild of a
// persisted state).
func newItem(pool string, input []byte, r group.Scalar) (pendingItem, error) {
	fin, req, err := client.DeterministicBlind([][]byte{input}, []oprf.Blind{r})
	if err != nil {
		// Only a zero blind or an input hashing to the identity, which
		// no input does but with probability about 2^-252.
		return pendingItem{}, fmt.Errorf("%w: blinding: %v", ErrMalformed, err)
	}
	blinded, err := req.Elements[0].MarshalBinaryCompress()
	if err != nil {
		return pendingItem{}, fmt.Errorf("admission: encoding a blinded element: %w", err)
	}
	return pendingItem{pool: pool, input: input, blind: r, blinded: blinded, fin: fin}, nil
}

// Request returns the request of p, the same at every call (a retry
// sends it again).
func (p *Pending) Request() *TokenRequest {
	req := &TokenRequest{Requests: make([]BlindedItem, len(p.items))}
	for i, it := range p.items {
		req.Requests[i] = BlindedItem{Pool: it.pool, Blinded: bytes.Clone(it.blinded)}
	}
	return req
}

// Pools returns the pool keys of p, in the order of its request.
func (p *Pending) Pools() []string {
	out := make([]string, len(p.items))
	for i, it := range p.items {
		out[i] = it.pool
	}
	return out
}

// pendingVersion opens the binary form of a Pending.
const pendingVersion = 1

// MarshalBinary returns p's binary form: a version byte (1), the number
// of items (2 bytes, big endian), then per item the pool key's length (2
// bytes), the pool key, the input and the blind (ElementSize bytes).
func (p *Pending) MarshalBinary() ([]byte, error) {
	b := []byte{pendingVersion}
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.items)))
	for _, it := range p.items {
		r, err := it.blind.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("admission: encoding a blind: %w", err)
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(it.pool)))
		b = append(b, it.pool...)
		b = append(b, it.input...)
		b = append(b, r...)
	}
	return b, nil
}

// ParsePending rebuilds a Pending from its binary form (MarshalBinary),
// recomputing each blinded element from its input and blind. Bytes that
// do not decode to a state Blind could have returned are an error
// wrapping ErrMalformed (ErrCount, ErrDuplicate for the item list).
func ParsePending(b []byte) (*Pending, error) {
	if len(b) < 3 || b[0] != pendingVersion {
		return nil, fmt.Errorf("%w: pending state: no version %d header", ErrMalformed, pendingVersion)
	}
	n := int(binary.BigEndian.Uint16(b[1:3]))
	b = b[3:]
	if n == 0 || n > MaxRequests {
		return nil, fmt.Errorf("%w: pending state: %w: %d items", ErrMalformed, ErrCount, n)
	}
	pools := make([]string, n)
	inputs := make([][]byte, n)
	blinds := make([][]byte, n)
	for i := range n {
		if len(b) < 2 {
			return nil, fmt.Errorf("%w: pending state truncated at item %d", ErrMalformed, i)
		}
		l := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+l+InputSize+ElementSize {
			return nil, fmt.Errorf("%w: pending state truncated at item %d", ErrMalformed, i)
		}
		pools[i] = string(b[2 : 2+l])
		b = b[2+l:]
		inputs[i], blinds[i], b = bytes.Clone(b[:InputSize]), b[InputSize:InputSize+ElementSize], b[InputSize+ElementSize:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: pending state: %d bytes after the last item", ErrMalformed, len(b))
	}
	if err := checkPools(pools); err != nil {
		return nil, fmt.Errorf("%w: pending state: %w", ErrMalformed, err)
	}
	p := &Pending{items: make([]pendingItem, n)}
	for i := range n {
		r := group.Ristretto255.NewScalar()
		if err := r.UnmarshalBinary(blinds[i]); err != nil || r.IsZero() {
			return nil, fmt.Errorf("%w: pending state: item %d: blind is not a non-zero canonical scalar", ErrMalformed, i)
		}
		var err error
		if p.items[i], err = newItem(pools[i], inputs[i], r); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Finalize turns the issuer's answer to p's request into tokens, one per
// item of the request, in its order: the token of a granted item, the
// zero Token for a refused one. Refusals come back as a *RefusedError
// (wrapping ErrRefused) beside the tokens of the granted items. A
// response of another length than the request is an error wrapping
// ErrCount; one whose items name other pool keys than the request's, or
// whose evaluated element is not a non-identity ristretto255 element, is
// an error wrapping ErrMalformed; both return no token.
//
// The client cannot check an evaluation in base mode: a token made from
// a wrong one fails at the verifier.
func Finalize(p *Pending, resp *TokenResponse) ([]Token, error) {
	if resp == nil || len(resp.Evaluations) != len(p.items) {
		n := 0
		if resp != nil {
			n = len(resp.Evaluations)
		}
		return nil, fmt.Errorf("%w: %d evaluations for %d requests", ErrCount, n, len(p.items))
	}
	tokens := make([]Token, len(p.items))
	var refused []Refusal
	for i, ev := range resp.Evaluations {
		it := &p.items[i]
		if ev.Pool != it.pool {
			return nil, fmt.Errorf("%w: evaluation %d is for pool key %q, request %d for %q", ErrMalformed, i, ev.Pool, i, it.pool)
		}
		if ev.Refused != "" {
			refused = append(refused, Refusal{Index: i, Pool: it.pool, Code: ev.Refused, Reason: ev.Reason})
			continue
		}
		e := group.Ristretto255.NewElement()
		if len(ev.Evaluated) != ElementSize || e.UnmarshalBinary(ev.Evaluated) != nil || e.IsIdentity() {
			return nil, fmt.Errorf("%w: evaluation %d (%s): not a ristretto255 element other than the identity", ErrMalformed, i, it.pool)
		}
		out, err := client.Finalize(it.fin, &oprf.Evaluation{Elements: []oprf.Evaluated{e}})
		if err != nil || len(out) != 1 || len(out[0]) != OutputSize {
			return nil, fmt.Errorf("%w: evaluation %d (%s): %v", ErrMalformed, i, it.pool, err)
		}
		copy(tokens[i].Input[:], it.input)
		copy(tokens[i].Output[:], out[0])
	}
	if refused != nil {
		return tokens, &RefusedError{Refusals: refused}
	}
	return tokens, nil
}
