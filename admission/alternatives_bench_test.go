package admission

// The costs the package doc weighs: RFC 9497 OPRF in base mode (the
// scheme), verifiable (VOPRF) and partially oblivious (POPRF) modes, and
// RFC 9474 blind RSA, each step for one token, with circl as the
// implementation of all four.

import (
	"crypto/rand"
	"crypto/rsa"
	"testing"

	"github.com/blanket-dp/blanket/internal/cputime"
	"github.com/cloudflare/circl/blindsign/blindrsa"
	"github.com/cloudflare/circl/oprf"
)

// oprfSteps measures the four steps of one token in mode (base,
// verifiable or partially oblivious, the latter with info as its public
// metadata).
func oprfSteps(b *testing.B, mode oprf.Mode) {
	suite := Suite()
	seed := make([]byte, 32)
	rand.Read(seed)
	key, err := oprf.DeriveKey(suite, mode, seed, []byte("pool key"))
	if err != nil {
		b.Fatal(err)
	}
	info := []byte("pool key")
	input := [][]byte{make([]byte, InputSize)}
	type client interface {
		Blind([][]byte) (*oprf.FinalizeData, *oprf.EvaluationRequest, error)
	}
	var (
		c        client
		evaluate func(*oprf.EvaluationRequest) (*oprf.Evaluation, error)
		finalize func(*oprf.FinalizeData, *oprf.Evaluation) ([][]byte, error)
		verify   func(in, out []byte) bool
	)
	switch mode {
	case oprf.BaseMode:
		s, cl := oprf.NewServer(suite, key), oprf.NewClient(suite)
		c, evaluate, finalize, verify = cl, s.Evaluate, cl.Finalize, s.VerifyFinalize
	case oprf.VerifiableMode:
		s, cl := oprf.NewVerifiableServer(suite, key), oprf.NewVerifiableClient(suite, key.Public())
		c, evaluate, finalize, verify = cl, s.Evaluate, cl.Finalize, s.VerifyFinalize
	case oprf.PartialObliviousMode:
		s, cl := oprf.NewPartialObliviousServer(suite, key), oprf.NewPartialObliviousClient(suite, key.Public())
		c = cl
		evaluate = func(r *oprf.EvaluationRequest) (*oprf.Evaluation, error) { return s.Evaluate(r, info) }
		finalize = func(f *oprf.FinalizeData, e *oprf.Evaluation) ([][]byte, error) { return cl.Finalize(f, e, info) }
		verify = func(in, out []byte) bool { return s.VerifyFinalize(in, info, out) }
	}
	fin, req, err := c.Blind(input)
	if err != nil {
		b.Fatal(err)
	}
	ev, err := evaluate(req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := finalize(fin, ev)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("blind", func(b *testing.B) {
		m := cputime.Start()
		for b.Loop() {
			c.Blind(input)
		}
		m.Report(b, 1, "")
	})
	b.Run("issue", func(b *testing.B) {
		m := cputime.Start()
		for b.Loop() {
			evaluate(req)
		}
		m.Report(b, 1, "")
	})
	b.Run("finalize", func(b *testing.B) {
		m := cputime.Start()
		for b.Loop() {
			finalize(fin, ev)
		}
		m.Report(b, 1, "")
	})
	b.Run("verify", func(b *testing.B) {
		m := cputime.Start()
		for b.Loop() {
			if !verify(input[0], out[0]) {
				b.Fatal("does not verify")
			}
		}
		m.Report(b, 1, "")
	})
}

// BenchmarkAlternatives measures each step of one token under each
// scheme the package doc compares.
func BenchmarkAlternatives(b *testing.B) {
	b.Run("oprf-base", func(b *testing.B) { oprfSteps(b, oprf.BaseMode) })
	b.Run("voprf", func(b *testing.B) { oprfSteps(b, oprf.VerifiableMode) })
	b.Run("poprf", func(b *testing.B) { oprfSteps(b, oprf.PartialObliviousMode) })
	b.Run("blind-rsa-2048", func(b *testing.B) {
		b.Run("keygen", func(b *testing.B) {
			m := cputime.Start()
			for b.Loop() {
				if _, err := rsa.GenerateKey(rand.Reader, 2048); err != nil {
					b.Fatal(err)
				}
			}
			m.Report(b, 1, "")
		})
		sk, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			b.Fatal(err)
		}
		c, err := blindrsa.NewClient(blindrsa.SHA384PSSDeterministic, &sk.PublicKey)
		if err != nil {
			b.Fatal(err)
		}
		v, _ := blindrsa.NewVerifier(blindrsa.SHA384PSSDeterministic, &sk.PublicKey)
		signer := blindrsa.NewSigner(sk)
		msg := make([]byte, InputSize)
		blinded, state, err := c.Blind(rand.Reader, msg)
		if err != nil {
			b.Fatal(err)
		}
		blindSig, err := signer.BlindSign(blinded)
		if err != nil {
			b.Fatal(err)
		}
		sig, err := c.Finalize(state, blindSig)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("blind", func(b *testing.B) {
			m := cputime.Start()
			for b.Loop() {
				c.Blind(rand.Reader, msg)
			}
			m.Report(b, 1, "")
		})
		b.Run("issue", func(b *testing.B) {
			m := cputime.Start()
			for b.Loop() {
				signer.BlindSign(blinded)
			}
			m.Report(b, 1, "")
		})
		b.Run("finalize", func(b *testing.B) {
			m := cputime.Start()
			for b.Loop() {
				c.Finalize(state, blindSig)
			}
			m.Report(b, 1, "")
		})
		b.Run("verify", func(b *testing.B) {
			m := cputime.Start()
			for b.Loop() {
				if err := v.Verify(msg, sig); err != nil {
					b.Fatal(err)
				}
			}
			m.Report(b, 1, "")
		})
	})
}
