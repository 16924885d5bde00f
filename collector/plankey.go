package collector

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// PlanKeyFile is the file, in the collector's data directory, that holds
// its plan-signing key with the SQLite store (mode 0600): the first line
// is plan.SigningSeedPrefix followed by the Ed25519 private key's seed
// (standard base64), each further line an endorsement of the key rollover
// chain that leads to it, oldest first (plan.Endorsement.String). With
// PostgreSQL the same text lives in the table plan_signing_key. Text
// written by a pre-release build, whose first line is the seed without
// the prefix, is rewritten with it when first read.
const PlanKeyFile = "plan-signing.key"

// planSigner is the collector's plan-signing key and the rollover chain
// that leads to it from its first key.
type planSigner struct {
	key   ed25519.PrivateKey
	chain []plan.Endorsement
}

// public returns the signing key's public half.
func (s *planSigner) public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// newPlanSigner returns a signer with a fresh key and no chain.
func newPlanSigner() (*planSigner, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("collector: generating the plan-signing key: %w", err)
	}
	return &planSigner{key: priv}, nil
}

// rotate returns a signer with a fresh key, endorsed by s's key from
// notBefore on, and s's chain followed by that endorsement.
func (s *planSigner) rotate(notBefore time.Time) (*planSigner, error) {
	if len(s.chain) >= plan.MaxEndorsements {
		return nil, fmt.Errorf("collector: the plan-signing key was rotated %d times, the most an app follows", len(s.chain))
	}
	next, err := newPlanSigner()
	if err != nil {
		return nil, err
	}
	next.chain = append(append([]plan.Endorsement(nil), s.chain...), plan.Endorse(s.key, next.public(), notBefore))
	return next, nil
}

// encode returns s in the stored form (PlanKeyFile).
func (s *planSigner) encode() string {
	lines := []string{plan.SigningSeedPrefix + base64.StdEncoding.EncodeToString(s.key.Seed())}
	for _, e := range s.chain {
		lines = append(lines, e.String())
	}
	return strings.Join(lines, "\n")
}

// decodePlanSigner reads the stored form of a signer and checks that its
// chain leads to its key. It reports whether the text has the form of a
// pre-release build, the seed without plan.SigningSeedPrefix, which the
// caller rewrites (encode).
func decodePlanSigner(text string) (s *planSigner, old bool, err error) {
	lines := strings.Fields(text)
	if len(lines) == 0 {
		return nil, false, errors.New("empty")
	}
	b64, ok := strings.CutPrefix(lines[0], plan.SigningSeedPrefix)
	seed, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, false, fmt.Errorf("the first line must be %s followed by standard base64 of a %d-byte Ed25519 seed", plan.SigningSeedPrefix, ed25519.SeedSize)
	}
	s = &planSigner{key: ed25519.NewKeyFromSeed(seed)}
	for i, l := range lines[1:] {
		e, err := plan.ParseEndorsement(l)
		if err != nil {
			return nil, false, fmt.Errorf("line %d: %v", i+2, err)
		}
		s.chain = append(s.chain, e)
	}
	if n := len(s.chain); n > 0 && !s.chain[n-1].Key.Equal(s.public()) {
		return nil, false, errors.New("the last endorsement does not name the key")
	}
	return s, !ok, nil
}

// loadOrCreatePlanSigner returns the signer in dir/PlanKeyFile, generating
// one on first use; it reports whether it was created. A file readable by
// group or others is refused. It holds the file's lock (secrets.Lock)
// meanwhile, as every access to the file does, so that it never runs
// between the read and the write of a rotation.
func loadOrCreatePlanSigner(ctx context.Context, dir string) (s *planSigner, created bool, err error) {
	unlock, err := secrets.Lock(ctx, filepath.Join(dir, PlanKeyFile))
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	return readPlanSignerFile(dir)
}

// readPlanSignerFile is loadOrCreatePlanSigner for a caller that holds the
// file's lock.
func readPlanSignerFile(dir string) (s *planSigner, created bool, err error) {
	path := filepath.Join(dir, PlanKeyFile)
	b, created, err := secrets.LoadOrCreate(path, func() ([]byte, error) {
		fresh, err := newPlanSigner()
		if err != nil {
			return nil, err
		}
		return []byte(fresh.encode()), nil
	})
	if err != nil {
		return nil, false, err
	}
	s, old, err := decodePlanSigner(string(b))
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", secrets.ErrSecretFile, path, err)
	}
	if old {
		if err := secrets.Replace(path, []byte(s.encode())); err != nil {
			return nil, false, fmt.Errorf("collector: rewriting %s with its seed prefixed: %w", path, err)
		}
	}
	return s, created, nil
}

// rotatePlanSignerFile replaces the signer in dir/PlanKeyFile by a new key
// that the old one endorses from notBefore on. It holds the file's lock
// from the read to the write, so that two rotations chain rather than
// fork (the second endorsing the old key's successor, not the old key)
// and none is lost.
func rotatePlanSignerFile(ctx context.Context, dir string, notBefore time.Time) (old, next *planSigner, err error) {
	path := filepath.Join(dir, PlanKeyFile)
	unlock, err := secrets.Lock(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	if old, _, err = readPlanSignerFile(dir); err != nil {
		return nil, nil, err
	}
	if next, err = old.rotate(notBefore); err != nil {
		return nil, nil, err
	}
	if err := secrets.Replace(path, []byte(next.encode())); err != nil {
		return nil, nil, fmt.Errorf("collector: writing %s: %w", path, err)
	}
	return old, next, nil
}

// PlanSigningKey returns the public plan-signing key of the collector that
// keeps its state in dir (and, when store is a PostgreSQL URL, in that
// database), generating the key when there is none yet, so that an
// operator can configure apps before the collector first starts. It is
// what an app pins (client.Config.PlanKey); plan.FormatSigningKey encodes
// it. The collector must be run with the same dir and store.
func PlanSigningKey(ctx context.Context, dir, store string) (ed25519.PublicKey, error) {
	if pgdb.IsURL(store) {
		st, err := openPGStore(ctx, store)
		if err != nil {
			return nil, err
		}
		defer st.close()
		s, _, err := st.planSigner(ctx)
		if err != nil {
			return nil, err
		}
		return s.public(), nil
	}
	if err := secrets.EnsureDir(dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOptions, err)
	}
	s, _, err := loadOrCreatePlanSigner(ctx, dir)
	if err != nil {
		return nil, err
	}
	return s.public(), nil
}

// RotatePlanSigningKey replaces the plan-signing key of the collector that
// keeps its state in dir (or store, a PostgreSQL URL) by a new one, and
// adds to its rollover chain a statement signed by the old key that the
// new one signs plans from notBefore on. The collector signs with the new
// key, and serves the chain with every plan, from its next start; apps
// pinned to any earlier key of the chain follow it (plan.VerifyPlan). It
// returns the old and the new public key.
func RotatePlanSigningKey(ctx context.Context, dir, store string, notBefore time.Time) (old, next ed25519.PublicKey, err error) {
	var o, n *planSigner
	if pgdb.IsURL(store) {
		st, err := openPGStore(ctx, store)
		if err != nil {
			return nil, nil, err
		}
		defer st.close()
		if o, n, err = st.rotatePlanSigner(ctx, notBefore); err != nil {
			return nil, nil, err
		}
	} else {
		if err := secrets.EnsureDir(dir); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrOptions, err)
		}
		if o, n, err = rotatePlanSignerFile(ctx, dir, notBefore); err != nil {
			return nil, nil, err
		}
	}
	return o.public(), n.public(), nil
}
