package admission

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/oprf"
)

// poolKey returns the pool key of pool in day-long period day.
func poolKey(pool string, day int64) string {
	return report.PeriodPoolKey(pool, "0123456789abcdef", report.Period{Start: day * 86400, Length: 86400})
}

// testServer is a base-mode OPRF server deriving one key per pool key,
// as the issuer does (package issuer is tested against it too).
type testServer struct{ seed []byte }

func newTestServer(t testing.TB) testServer {
	t.Helper()
	seed := make([]byte, 32)
	rand.Read(seed)
	return testServer{seed: seed}
}

func (s testServer) server(t testing.TB, pool string) oprf.Server {
	t.Helper()
	info, err := Info(pool)
	if err != nil {
		t.Fatal(err)
	}
	k, err := oprf.DeriveKey(Suite(), oprf.BaseMode, s.seed, info)
	if err != nil {
		t.Fatal(err)
	}
	return oprf.NewServer(Suite(), k)
}

// answer evaluates every item of req.
func (s testServer) answer(t testing.TB, req *TokenRequest) *TokenResponse {
	t.Helper()
	resp := &TokenResponse{}
	for _, it := range req.Requests {
		e := group.Ristretto255.NewElement()
		if err := e.UnmarshalBinary(it.Blinded); err != nil {
			t.Fatal(err)
		}
		ev, err := s.server(t, it.Pool).Evaluate(&oprf.EvaluationRequest{Elements: []oprf.Blinded{e}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := ev.Elements[0].MarshalBinaryCompress()
		resp.Evaluations = append(resp.Evaluations, Evaluation{Pool: it.Pool, Evaluated: b})
	}
	return resp
}

// TestRoundTripVerifiesUnderItsPoolKeyOnly: blind, evaluate, finalize;
// each token verifies under the key of its own pool key and under no
// other pool's or period's.
func TestRoundTripVerifiesUnderItsPoolKeyOnly(t *testing.T) {
	s := newTestServer(t)
	pools := []string{poolKey("a", 10), poolKey("b", 10), poolKey("a", 11)}
	p, req, err := Blind(pools)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := Finalize(p, s.answer(t, req))
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range tokens {
		for j, pool := range pools {
			if got := s.server(t, pool).VerifyFinalize(tok.Input[:], tok.Output[:]); got != (i == j) {
				t.Errorf("token of %s verifies under %s: %v", pools[i], pool, got)
			}
		}
	}
}

// TestPendingSurvivesPersistence: a pending state written and read back
// sends the same request and yields the same tokens.
func TestPendingSurvivesPersistence(t *testing.T) {
	s := newTestServer(t)
	p, req, err := Blind([]string{poolKey("a", 10), poolKey("b", 10)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParsePending(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(q.Request()) != fmt.Sprint(req) {
		t.Fatalf("restored request %v, want %v", q.Request(), req)
	}
	resp := s.answer(t, req)
	want, err := Finalize(p, resp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Finalize(q, resp)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("restored state finalizes to %x, want %x", got, want)
	}
	if b2, _ := q.MarshalBinary(); !bytes.Equal(b, b2) {
		t.Errorf("restored state encodes to %x, want %x", b2, b)
	}
}

// TestBlindHidesTheInput: the issuer sees neither the input nor its hash
// to the group, and blinding one input twice gives unrelated elements.
func TestBlindHidesTheInput(t *testing.T) {
	input := make([]byte, InputSize)
	rand.Read(input)
	dst := []byte("HashToGroup-OPRFV1-\x00-ristretto255-SHA512")
	h, _ := group.Ristretto255.HashToElement(input, dst).MarshalBinaryCompress()
	var blinded [][]byte
	for range 2 {
		r, err := drawBlind(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		it, err := newItem(poolKey("a", 1), input, r)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(it.blinded, h) || bytes.Contains(it.blinded, input) {
			t.Errorf("blinded element %x shows the input %x or its hash %x", it.blinded, input, h)
		}
		blinded = append(blinded, it.blinded)
	}
	if bytes.Equal(blinded[0], blinded[1]) {
		t.Errorf("one input blinded twice gave %x both times", blinded[0])
	}
}

// TestBlindRefusesBadRequests: no pool key, too many, one twice, one
// without a period.
func TestBlindRefusesBadRequests(t *testing.T) {
	many := make([]string, MaxRequests+1)
	for i := range many {
		many[i] = poolKey(fmt.Sprint(i), 1)
	}
	for _, c := range []struct {
		name  string
		pools []string
		want  error
	}{
		{"none", nil, ErrCount},
		{"too many", many, ErrCount},
		{"twice", []string{poolKey("a", 1), poolKey("a", 1)}, ErrDuplicate},
		{"no period", []string{"a"}, ErrMalformed},
		{"too long", []string{poolKey(string(bytes.Repeat([]byte("x"), MaxPoolKeyLen)), 1)}, ErrMalformed},
		{"not UTF-8", []string{poolKey("\xff", 1)}, ErrMalformed},
	} {
		if _, _, err := Blind(c.pools); !errors.Is(err, c.want) {
			t.Errorf("%s: Blind: %v, want %v", c.name, err, c.want)
		}
	}
	if _, _, err := Blind(many[:MaxRequests]); err != nil {
		t.Errorf("Blind of MaxRequests pool keys: %v", err)
	}
}

// TestFinalizeRefusesBadResponses: wrong count, another pool key, an
// element that is not one; refusals come back beside the other tokens.
func TestFinalizeRefusesBadResponses(t *testing.T) {
	s := newTestServer(t)
	pools := []string{poolKey("a", 1), poolKey("b", 1)}
	p, req, err := Blind(pools)
	if err != nil {
		t.Fatal(err)
	}
	good := s.answer(t, req)
	identity, _ := group.Ristretto255.Identity().MarshalBinaryCompress()
	edit := func(f func(r *TokenResponse)) *TokenResponse {
		r := &TokenResponse{Evaluations: append([]Evaluation(nil), good.Evaluations...)}
		f(r)
		return r
	}
	for _, c := range []struct {
		name string
		resp *TokenResponse
		want error
	}{
		{"nil", nil, ErrCount},
		{"short", edit(func(r *TokenResponse) { r.Evaluations = r.Evaluations[:1] }), ErrCount},
		{"swapped", edit(func(r *TokenResponse) { r.Evaluations[0], r.Evaluations[1] = r.Evaluations[1], r.Evaluations[0] }), ErrMalformed},
		{"identity", edit(func(r *TokenResponse) { r.Evaluations[1].Evaluated = identity }), ErrMalformed},
		{"short element", edit(func(r *TokenResponse) { r.Evaluations[1].Evaluated = r.Evaluations[1].Evaluated[:31] }), ErrMalformed},
		{"not an element", edit(func(r *TokenResponse) { r.Evaluations[1].Evaluated = bytes.Repeat([]byte{0xff}, 32) }), ErrMalformed},
	} {
		if tokens, err := Finalize(p, c.resp); !errors.Is(err, c.want) || tokens != nil {
			t.Errorf("%s: Finalize: %d tokens, %v; want none, %v", c.name, len(tokens), err, c.want)
		}
	}
	refused := edit(func(r *TokenResponse) {
		r.Evaluations[0] = Evaluation{Pool: pools[0], Refused: RefusedAlreadyGranted, Reason: "granted before"}
	})
	tokens, err := Finalize(p, refused)
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, ErrRefused) || len(re.Refusals) != 1 || re.Refusals[0].Index != 0 || re.Refusals[0].Code != RefusedAlreadyGranted {
		t.Fatalf("Finalize with item 0 refused: %v", err)
	}
	if len(tokens) != 2 || !tokens[0].IsZero() || tokens[1].IsZero() || !s.server(t, pools[1]).VerifyFinalize(tokens[1].Input[:], tokens[1].Output[:]) {
		t.Errorf("Finalize with item 0 refused: tokens %x, want zero then a valid one", tokens)
	}
}

// TestTokenBinaryRoundTrip: ParseToken inverts MarshalBinary and refuses
// other lengths.
func TestTokenBinaryRoundTrip(t *testing.T) {
	var tok Token
	rand.Read(tok.Input[:])
	rand.Read(tok.Output[:])
	b, _ := tok.MarshalBinary()
	if got, err := ParseToken(b); err != nil || got != tok {
		t.Errorf("ParseToken(MarshalBinary) = %x, %v", got, err)
	}
	for _, n := range []int{0, TokenSize - 1, TokenSize + 1} {
		if _, err := ParseToken(make([]byte, n)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseToken of %d bytes: %v, want ErrMalformed", n, err)
		}
	}
}

// TestRFC9497BaseModeVector checks key derivation, blinding and
// finalization against the test vector of RFC 9497 Appendix A.1.1
// (OPRF(ristretto255, SHA-512), base mode, test vector 2), through the
// code paths Blind and Finalize use.
func TestRFC9497BaseModeVector(t *testing.T) {
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	seed := unhex("a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3")
	k, err := oprf.DeriveKey(Suite(), oprf.BaseMode, seed, []byte("test key"))
	if err != nil {
		t.Fatal(err)
	}
	if sk, _ := k.MarshalBinary(); !bytes.Equal(sk, unhex("5ebcea5ee37023ccb9fc2d2019f9d7737be85591ae8652ffa9ef0f4d37063b0e")) {
		t.Fatalf("DeriveKey = %x, want RFC 9497's skSm", sk)
	}
	r := group.Ristretto255.NewScalar()
	if err := r.UnmarshalBinary(unhex("64d37aed22a27f5191de1c1d69fadb899d8862b58eb4220029e036ec4c1f6706")); err != nil {
		t.Fatal(err)
	}
	pool := poolKey("a", 1)
	it, err := newItem(pool, unhex("5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"), r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(it.blinded, unhex("da27ef466870f5f15296299850aa088629945a17d1f5b7f5ff043f76b3c06418")) {
		t.Fatalf("blinded element %x, want RFC 9497's", it.blinded)
	}
	p := &Pending{items: []pendingItem{it}}
	tokens, err := Finalize(p, &TokenResponse{Evaluations: []Evaluation{{Pool: pool,
		Evaluated: unhex("b4cbf5a4f1eeda5a63ce7b77c7d23f461db3fcab0dd28e4e17cecb5c90d02c25")}}})
	if err != nil {
		t.Fatal(err)
	}
	want := unhex("f4a74c9c592497375e796aa837e907b1a045d34306a749db9f34221f7e750cb4f2a6413a6bf6fa5e19ba6348eb673934a722a7ede2e7621306d18951e7cf2c73")
	if !bytes.Equal(tokens[0].Output[:], want) {
		t.Errorf("output %x, want RFC 9497's %x", tokens[0].Output, want)
	}
}

// TestInfoIsInjective: Info length-prefixes the pool key, so no two pool
// keys share an info.
func TestInfoIsInjective(t *testing.T) {
	a, _ := Info(poolKey("ab", 1))
	b, _ := Info(poolKey("a", 1))
	if bytes.Equal(a, b) || !bytes.HasPrefix(a, []byte(infoLabel)) {
		t.Errorf("Info: %q and %q", a, b)
	}
	if _, err := Info("no period"); !errors.Is(err, ErrMalformed) {
		t.Errorf("Info of a key without a period: %v, want ErrMalformed", err)
	}
}

// TestCheckPoolKeyRefusesControlCharacters: a NUL in a pool key reached
// PostgreSQL's text column and failed the whole token request with a 503
// (review of issue 25); no pool key the SDK makes has one.
func TestCheckPoolKeyRefusesControlCharacters(t *testing.T) {
	good := report.PeriodPoolKey("ui", "00000000000000e1", report.Period{Start: 86400, Length: 86400})
	if _, err := CheckPoolKey(good); err != nil {
		t.Fatalf("%q: %v", good, err)
	}
	for _, bad := range []string{"u\x00i#00000000000000e1#86400+86400", "ui\n#00000000000000e1#86400+86400", "u\x7fi#00000000000000e1#86400+86400"} {
		if _, err := CheckPoolKey(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err %v, want ErrMalformed", bad, err)
		}
	}
}
