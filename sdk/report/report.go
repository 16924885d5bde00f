// Package report is the wire format between apps, the shuffler and the
// collector: the envelope an app uploads, the batch the shuffler forwards,
// and the HPKE sealing that keeps report contents from the shuffler.
//
// An app seals each randomized report to the collector's public key with
// [Seal], binding the metric and its plan parameters into the HPKE info so a
// report cannot be replayed into another metric, wraps it in an [Envelope]
// and uploads a batch of envelopes ([EncodeEnvelopes]) to the shuffler. The
// shuffler sees the metric name and an opaque ciphertext; it forwards a
// [Batch] of ciphertexts in random order to the collector, which opens each
// with [Open].
//
// Every decoder here takes untrusted bytes: it returns an error wrapping
// [ErrMalformed] and never panics.
package report

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Errors.
var (
	// ErrMalformed reports bytes that do not decode.
	ErrMalformed = errors.New("report: malformed")
	// ErrOpen reports a ciphertext that does not open with the key and info.
	ErrOpen = errors.New("report: cannot open sealed report")
	// ErrTooLarge reports a message over a size limit.
	ErrTooLarge = errors.New("report: too large")
	// ErrNoPeriod reports a pool key or a binding without a reporting
	// period: no per-period guarantee could cover such a report.
	ErrNoPeriod = errors.New("no reporting period")
)

// Limits on what decoders accept.
const (
	// MaxMetricLen bounds a metric name in bytes.
	MaxMetricLen = 256
	// MaxSealedLen bounds one sealed report in bytes.
	MaxSealedLen = 64 << 10
	// MaxBatchReports bounds the reports of one envelope upload or batch.
	MaxBatchReports = 1 << 22
	// MaxTokenLen bounds an envelope's admission token in bytes.
	MaxTokenLen = 512
)

// SuiteX25519ChaCha is the one HPKE suite in use: DHKEM(X25519, HKDF-SHA256),
// HKDF-SHA256, ChaCha20-Poly1305. The suite id travels in every envelope so
// that a hybrid post-quantum suite can be added later.
const SuiteX25519ChaCha uint16 = 1

// ID is a random 16-byte report id. It is not linked to the user: the
// shuffler uses it only to drop duplicate uploads (a retry after a lost
// acknowledgement) and never forwards it.
type ID [16]byte

// NewID returns a random ID from crypto/rand.
func NewID() ID {
	var id ID
	rand.Read(id[:])
	return id
}

// String returns the id in hex.
func (id ID) String() string { return fmt.Sprintf("%x", id[:]) }

// Envelope is what an app uploads for one report.
type Envelope struct {
	// ID identifies the report for deduplication at the shuffler.
	ID ID
	// Metric is the metric name, in clear for pooling.
	Metric string
	// Suite is the HPKE suite of Sealed.
	Suite uint16
	// Sealed is the HPKE ciphertext (encapsulated key followed by the
	// sealed report).
	Sealed []byte
	// Token is the admission token for Metric's pool and period (package
	// admission), empty when the app has none. The shuffler checks and
	// spends it, and never forwards it: it is not part of the report.
	Token []byte
}

// envelopeMagic starts an envelope. BLE2 added the admission token; the
// pre-release BLE1 is refused.
const envelopeMagic = "BLE2"

// AppendEnvelope appends the encoding of e to b. It panics when e.Token is
// longer than MaxTokenLen (a programmer error: tokens are fixed-size).
func AppendEnvelope(b []byte, e Envelope) []byte {
	if len(e.Token) > MaxTokenLen {
		panic(fmt.Sprintf("report: token of %d bytes, limit %d", len(e.Token), MaxTokenLen))
	}
	b = append(b, envelopeMagic...)
	b = append(b, e.ID[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.Metric)))
	b = append(b, e.Metric...)
	b = binary.BigEndian.AppendUint16(b, e.Suite)
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Sealed)))
	b = append(b, e.Sealed...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.Token)))
	return append(b, e.Token...)
}

// EncodeEnvelopes returns the upload body for envs.
func EncodeEnvelopes(envs []Envelope) []byte {
	n := 8
	for _, e := range envs {
		n += 4 + 16 + 2 + len(e.Metric) + 2 + 4 + len(e.Sealed) + 2 + len(e.Token)
	}
	b := make([]byte, 0, n)
	b = append(b, "BLU1"...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(envs)))
	for _, e := range envs {
		b = AppendEnvelope(b, e)
	}
	return b
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at byte %d: %s", ErrMalformed, r.off, fmt.Sprintf(format, args...))
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail("%s: need %d bytes, %d left", what, n, len(r.b)-r.off)
		return nil
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v
}

func (r *reader) u16(what string) uint16 {
	v := r.take(2, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint16(v)
}

func (r *reader) u32(what string) uint32 {
	v := r.take(4, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

func (r *reader) envelope() Envelope {
	var e Envelope
	if m := r.take(4, "envelope magic"); m != nil && string(m) != envelopeMagic {
		r.fail("envelope magic %q, want %q", m, envelopeMagic)
	}
	copy(e.ID[:], r.take(16, "report id"))
	ml := int(r.u16("metric length"))
	if r.err == nil && (ml == 0 || ml > MaxMetricLen) {
		r.fail("metric length %d outside [1,%d]", ml, MaxMetricLen)
	}
	metric := r.take(ml, "metric")
	if r.err == nil && !utf8.Valid(metric) {
		r.fail("metric is not UTF-8")
	}
	e.Metric = string(metric)
	e.Suite = r.u16("suite")
	sl := int(r.u32("sealed length"))
	if r.err == nil && (sl == 0 || sl > MaxSealedLen) {
		r.fail("sealed length %d outside [1,%d]", sl, MaxSealedLen)
	}
	e.Sealed = append([]byte(nil), r.take(sl, "sealed report")...)
	tl := int(r.u16("token length"))
	if r.err == nil && tl > MaxTokenLen {
		r.fail("token length %d over %d", tl, MaxTokenLen)
	}
	if tok := r.take(tl, "token"); tl > 0 && tok != nil {
		e.Token = append([]byte(nil), tok...)
	}
	return e
}

// DecodeEnvelope decodes one envelope (as written by AppendEnvelope).
func DecodeEnvelope(b []byte) (Envelope, error) {
	r := &reader{b: b}
	e := r.envelope()
	if r.err == nil && r.off != len(b) {
		r.fail("%d trailing bytes", len(b)-r.off)
	}
	return e, r.err
}

// DecodeEnvelopes decodes an upload body. On a malformed envelope it
// returns the envelopes before it and the error: a client's bad bytes never
// take down the others already decoded, and the caller decides.
func DecodeEnvelopes(b []byte) ([]Envelope, error) {
	r := &reader{b: b}
	if m := r.take(4, "upload magic"); m != nil && string(m) != "BLU1" {
		r.fail("upload magic %q, want %q", m, "BLU1")
	}
	n := r.u32("envelope count")
	if r.err != nil {
		return nil, r.err
	}
	if n > MaxBatchReports {
		return nil, fmt.Errorf("%w: %d envelopes, limit %d", ErrTooLarge, n, MaxBatchReports)
	}
	// Each envelope takes at least 32 bytes: cap the preallocation by what
	// the body can hold.
	out := make([]Envelope, 0, min(int(n), len(b)/32))
	for i := range int(n) {
		e := r.envelope()
		if r.err != nil {
			return out, fmt.Errorf("envelope %d: %w", i, r.err)
		}
		out = append(out, e)
	}
	if r.off != len(b) {
		return out, fmt.Errorf("%w: %d trailing bytes after %d envelopes", ErrMalformed, len(b)-r.off, n)
	}
	return out, nil
}

// Batch is what the shuffler forwards: sealed reports of one metric in a
// uniformly random order, with nothing else about their senders.
type Batch struct {
	// ID identifies the batch; the collector ingests each id once.
	ID ID
	// Metric is the metric name.
	Metric string
	// Suite is the HPKE suite of every report.
	Suite uint16
	// Sealed are the ciphertexts.
	Sealed [][]byte
	// Draws is how many of Sealed the shuffler added itself: draws of the
	// metric's blanket distribution (the plan's floor), sealed like any
	// report and shuffled among them, so that nothing tells them apart.
	// The others came from apps.
	Draws int
}

// The batch magics. BLB2 carries Draws; a batch without draws is encoded
// as BLB1, byte for byte what shufflers before the floor wrote, so that
// collectors of either age take it.
const (
	batchMagicV1 = "BLB1"
	batchMagicV2 = "BLB2"
)

// EncodeBatch returns the encoding of b. It panics when b.Draws is
// negative or above len(b.Sealed) (a programmer error).
func EncodeBatch(b Batch) []byte {
	if b.Draws < 0 || b.Draws > len(b.Sealed) {
		panic(fmt.Sprintf("report: a batch of %d reports with %d draws", len(b.Sealed), b.Draws))
	}
	n := 4 + 16 + 2 + len(b.Metric) + 2 + 4 + 4
	for _, s := range b.Sealed {
		n += 4 + len(s)
	}
	out := make([]byte, 0, n)
	if b.Draws == 0 {
		out = append(out, batchMagicV1...)
	} else {
		out = append(out, batchMagicV2...)
	}
	out = append(out, b.ID[:]...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(b.Metric)))
	out = append(out, b.Metric...)
	out = binary.BigEndian.AppendUint16(out, b.Suite)
	if b.Draws > 0 {
		out = binary.BigEndian.AppendUint32(out, uint32(b.Draws))
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(b.Sealed)))
	for _, s := range b.Sealed {
		out = binary.BigEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	return out
}

// DecodeBatch decodes a batch.
func DecodeBatch(p []byte) (Batch, error) {
	r := &reader{b: p}
	var b Batch
	m := r.take(4, "batch magic")
	if m != nil && string(m) != batchMagicV1 && string(m) != batchMagicV2 {
		r.fail("batch magic %q, want %q or %q", m, batchMagicV1, batchMagicV2)
	}
	copy(b.ID[:], r.take(16, "batch id"))
	ml := int(r.u16("metric length"))
	if r.err == nil && (ml == 0 || ml > MaxMetricLen) {
		r.fail("metric length %d outside [1,%d]", ml, MaxMetricLen)
	}
	metric := r.take(ml, "metric")
	if r.err == nil && !utf8.Valid(metric) {
		r.fail("metric is not UTF-8")
	}
	b.Metric = string(metric)
	b.Suite = r.u16("suite")
	var draws uint32
	if string(m) == batchMagicV2 {
		draws = r.u32("draw count")
		if r.err == nil && draws == 0 {
			r.fail("a %s batch with 0 draws (it is encoded as %s)", batchMagicV2, batchMagicV1)
		}
	}
	n := r.u32("report count")
	if r.err != nil {
		return Batch{}, r.err
	}
	if n > MaxBatchReports {
		return Batch{}, fmt.Errorf("%w: %d reports, limit %d", ErrTooLarge, n, MaxBatchReports)
	}
	if draws > n {
		return Batch{}, fmt.Errorf("%w: %d draws in a batch of %d reports", ErrMalformed, draws, n)
	}
	b.Draws = int(draws)
	b.Sealed = make([][]byte, 0, min(int(n), len(p)/5))
	for range int(n) {
		sl := int(r.u32("sealed length"))
		if r.err == nil && sl > MaxSealedLen {
			r.fail("sealed length %d above %d", sl, MaxSealedLen)
		}
		s := r.take(sl, "sealed report")
		if r.err != nil {
			return Batch{}, r.err
		}
		b.Sealed = append(b.Sealed, append([]byte(nil), s...))
	}
	if r.off != len(p) {
		return Batch{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(p)-r.off)
	}
	return b, nil
}

// Binding is what a sealed report is bound to: the HPKE info, with the
// id of the collector key it is sealed to (PublicKey.ID). A report sealed
// for one metric, plugin, version, eps0, plan epoch or period does not
// open under another.
type Binding struct {
	// Metric is the metric name.
	Metric string
	// Plugin and Version identify the randomizer.
	Plugin, Version string
	// Eps0 is the metric's local budget in the plan.
	Eps0 float64
	// Epoch identifies the plan (plan.Plan.Epoch), so that a report opens
	// only under the plan it was randomized for, even when another plan
	// has the same metric, plugin, version and eps0 with another
	// configuration (categories, range, parameters, weights).
	Epoch string
	// Period is the reporting period the report belongs to, so that a
	// report does not open under another period (a replay into another
	// period's batch). Seal and Open refuse the zero Period.
	Period Period
}

// info is the binding's part of the HPKE info (sealInfo adds the key id);
// PoolBinding hashes the metrics' infos.
func (b Binding) info() []byte {
	return []byte("blanket/report/v3\x00" + b.Metric + "\x00" + b.Plugin + "\x00" + b.Version + "\x00" + strconv.FormatFloat(b.Eps0, 'g', -1, 64) + "\x00" + b.Epoch +
		"\x00period=" + b.Period.String())
}

// Period is a reporting period: the Unix seconds [Start, Start+Length),
// Start a multiple of Length (plan.Plan.Period).
type Period struct {
	Start, Length int64
}

// MaxPeriodLength bounds a period's length in seconds (plan.MaxPeriod).
const MaxPeriodLength = 366 * 24 * 3600

// IsZero reports whether p is the zero Period (no period).
func (p Period) IsZero() bool { return p == Period{} }

// End returns the Unix second where p ends.
func (p Period) End() int64 { return p.Start + p.Length }

// String returns p as "<start>+<length>" in seconds, the form it takes in
// a pool key and a binding.
func (p Period) String() string {
	return strconv.FormatInt(p.Start, 10) + "+" + strconv.FormatInt(p.Length, 10)
}

// Valid returns an error wrapping ErrMalformed unless p is a period: a
// length in [1, MaxPeriodLength] seconds and a start that is a
// non-negative multiple of it.
func (p Period) Valid() error {
	if p.Length < 1 || p.Length > MaxPeriodLength {
		return fmt.Errorf("%w: period length %d s outside [1, %d]", ErrMalformed, p.Length, MaxPeriodLength)
	}
	if p.Start < 0 || p.Start%p.Length != 0 {
		return fmt.Errorf("%w: period start %d is not a non-negative multiple of its length %d", ErrMalformed, p.Start, p.Length)
	}
	return nil
}

// ParsePeriod parses the String form of a period and validates it.
func ParsePeriod(s string) (Period, error) {
	a, b, ok := strings.Cut(s, "+")
	if !ok || !digits(a) || !digits(b) {
		return Period{}, fmt.Errorf("%w: period %q, want <start>+<length> in seconds", ErrMalformed, s)
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	length, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil {
		return Period{}, fmt.Errorf("%w: period %q out of range", ErrMalformed, s)
	}
	p := Period{Start: start, Length: length}
	return p, p.Valid()
}

// digits reports whether s is 1 to 19 ASCII digits without a leading
// zero (one form per number, so that a pool key is canonical).
func digits(s string) bool {
	if len(s) == 0 || len(s) > 19 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// PoolKeySep separates the pool name, the plan epoch and the period in an
// envelope's or batch's Metric field (PeriodPoolKey).
const PoolKeySep = "#"

// PeriodPoolKey returns what an envelope of a report of period carries in
// its Metric field: the shuffler pool, the epoch of the plan the report
// was sealed under and the period, joined by PoolKeySep
// ("ui/screen#<epoch>#<start>+<length>"), so that the shuffler pools, and
// releases at least n_min of, reports of one epoch and one period at a
// time.
func PeriodPoolKey(pool, epoch string, period Period) string {
	return pool + PoolKeySep + epoch + PoolKeySep + period.String()
}

// ParsePoolKey splits a PeriodPoolKey into its pool, epoch and period. A
// key without a period tag is an error wrapping ErrMalformed and
// ErrNoPeriod, a malformed period one wrapping ErrMalformed. An empty
// epoch is returned as is: the caller decides.
func ParsePoolKey(key string) (pool, epoch string, period Period, err error) {
	pool, rest, _ := strings.Cut(key, PoolKeySep)
	epoch, ps, tagged := strings.Cut(rest, PoolKeySep)
	if !tagged {
		return "", "", Period{}, fmt.Errorf("%w: pool key %q: %w (want <pool>%s<epoch>%s<start>+<length>)", ErrMalformed, key, ErrNoPeriod, PoolKeySep, PoolKeySep)
	}
	if period, err = ParsePeriod(ps); err != nil {
		return "", "", Period{}, fmt.Errorf("pool key %q: %w", key, err)
	}
	return pool, epoch, period, nil
}

func suite() (hpke.KEM, hpke.KDF, hpke.AEAD) {
	return hpke.DHKEM(ecdh.X25519()), hpke.HKDFSHA256(), hpke.ChaCha20Poly1305()
}

// sealInfo is the HPKE info of a report bound to b and sealed to the key
// of id: naming the key makes a report sealed to one key of the collector's
// schedule fail to open under any other by the info as well as by the
// KEM, whatever the keys' history.
func sealInfo(b Binding, id string) []byte {
	return append(b.info(), "\x00key="+id...)
}

// KeyIDLen is the length of a key id (PublicKey.ID): hex digits.
const KeyIDLen = 16

// KeyID returns the id of the collector public key pub (its bytes): the
// first KeyIDLen hex digits of SHA-256 of "blanket report key\x00" and the
// key. The plan's key schedule names keys by it, and every sealed report's
// HPKE info carries it.
func KeyID(pub []byte) string {
	h := sha256.New()
	h.Write([]byte("blanket report key\x00"))
	h.Write(pub)
	return hex.EncodeToString(h.Sum(nil))[:KeyIDLen]
}

// GenerateKey returns a new collector key pair: the private key bytes (keep
// secret) and the public key bytes (publish in the plan).
func GenerateKey() (priv, pub []byte, err error) {
	kem, _, _ := suite()
	k, err := kem.GenerateKey()
	if err != nil {
		return nil, nil, err
	}
	priv, err = k.Bytes()
	if err != nil {
		return nil, nil, err
	}
	return priv, k.PublicKey().Bytes(), nil
}

// PublicKey is a parsed collector public key.
type PublicKey struct {
	k  hpke.PublicKey
	id string
}

// ParsePublicKey parses public key bytes.
func ParsePublicKey(b []byte) (*PublicKey, error) {
	kem, _, _ := suite()
	k, err := kem.NewPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %v", ErrMalformed, err)
	}
	return &PublicKey{k: k, id: KeyID(b)}, nil
}

// PrivateKey is a parsed collector private key.
type PrivateKey struct {
	k hpke.PrivateKey
	// id is the public half's KeyID.
	id string
}

// ParsePrivateKey parses private key bytes.
func ParsePrivateKey(b []byte) (*PrivateKey, error) {
	kem, _, _ := suite()
	k, err := kem.NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: private key: %v", ErrMalformed, err)
	}
	return &PrivateKey{k: k, id: KeyID(k.PublicKey().Bytes())}, nil
}

// PublicKey returns the public half.
func (k *PrivateKey) PublicKey() *PublicKey { return &PublicKey{k: k.k.PublicKey(), id: k.id} }

// ID returns the id of the key's public half (KeyID).
func (k *PrivateKey) ID() string { return k.id }

// Bytes returns the public key bytes.
func (k *PublicKey) Bytes() []byte { return k.k.Bytes() }

// ID returns the key's id (KeyID).
func (k *PublicKey) ID() string { return k.id }

// Seal seals a randomized report to the collector's key pk, bound to b
// and to pk's id. It fails with ErrNoPeriod when b has no period.
func Seal(pk *PublicKey, b Binding, report []byte) ([]byte, error) {
	if b.Period.IsZero() {
		return nil, fmt.Errorf("report: sealing a report of %q: %w", b.Metric, ErrNoPeriod)
	}
	_, kdf, aead := suite()
	return hpke.Seal(pk.k, kdf, aead, sealInfo(b, pk.id), report)
}

// Open opens a sealed report; it fails with ErrOpen when the ciphertext was
// not sealed to this key (and its id) with this binding, or was altered,
// and when b has no period (wrapping ErrNoPeriod too: no report is sealed
// so).
func Open(sk *PrivateKey, b Binding, sealed []byte) ([]byte, error) {
	if b.Period.IsZero() {
		return nil, fmt.Errorf("%w: binding of %q: %w", ErrOpen, b.Metric, ErrNoPeriod)
	}
	_, kdf, aead := suite()
	pt, err := hpke.Open(sk.k, kdf, aead, sealInfo(b, sk.id), sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOpen, err)
	}
	return pt, nil
}

// Part is one metric's report inside a pooled message.
type Part struct {
	// Metric is the metric's index in the plan's metric list.
	Metric int
	// Report is the randomized report.
	Report []byte
}

// messageVersion is the first byte of an encoded message.
const messageVersion = 1

// MaxParts bounds the parts of one message.
const MaxParts = 1 << 12

// MessageOverhead is the bytes EncodeMessage adds to the reports: 3 per
// message and 6 per part.
func MessageOverhead(parts int) int { return 3 + 6*parts }

// SealOverhead is the bytes Seal adds to a plaintext: the X25519
// encapsulated key (32) and the ChaCha20-Poly1305 tag (16).
const SealOverhead = 48

// EncodeMessage returns the plaintext of a pooled message: the reports
// that travel together under joint travel (one part per metric) or the one
// report of parallel travel. It is sealed like a report, under a
// PoolBinding. It panics when parts break DecodeMessage's limits (more
// than MaxParts parts, a metric index above 65535 or a report longer than
// MaxSealedLen): a verified plan never makes such a message.
func EncodeMessage(parts []Part) []byte {
	if len(parts) > MaxParts {
		panic(fmt.Sprintf("report: %d parts, limit %d", len(parts), MaxParts))
	}
	for _, p := range parts {
		if p.Metric < 0 || p.Metric > 0xFFFF || len(p.Report) > MaxSealedLen {
			panic(fmt.Sprintf("report: part of metric %d with %d bytes", p.Metric, len(p.Report)))
		}
	}
	n := 1 + 2
	for _, p := range parts {
		n += 2 + 4 + len(p.Report)
	}
	b := make([]byte, 0, n)
	b = append(b, messageVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(parts)))
	for _, p := range parts {
		b = binary.BigEndian.AppendUint16(b, uint16(p.Metric))
		b = binary.BigEndian.AppendUint32(b, uint32(len(p.Report)))
		b = append(b, p.Report...)
	}
	return b
}

// DecodeMessage decodes a pooled message. The parts' reports alias b.
func DecodeMessage(b []byte) ([]Part, error) {
	r := &reader{b: b}
	if v := r.take(1, "message version"); v != nil && v[0] != messageVersion {
		r.fail("message version %d, want %d", v[0], messageVersion)
	}
	n := int(r.u16("part count"))
	if r.err == nil && (n == 0 || n > MaxParts) {
		r.fail("part count %d outside [1,%d]", n, MaxParts)
	}
	if r.err != nil {
		return nil, r.err
	}
	parts := make([]Part, 0, min(n, len(b)/6))
	for range n {
		m := int(r.u16("part metric"))
		l := int(r.u32("part length"))
		if r.err == nil && l > MaxSealedLen {
			r.fail("part length %d above %d", l, MaxSealedLen)
		}
		rep := r.take(l, "part report")
		if r.err != nil {
			return nil, r.err
		}
		parts = append(parts, Part{Metric: m, Report: rep})
	}
	if r.off != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes after %d parts", ErrMalformed, len(b)-r.off, n)
	}
	return parts, nil
}

// PoolBinding returns the binding of the messages of a pooled travel mode:
// its pool name, the travel mode, and every metric's binding, in plan
// order. A message sealed under one plan does not open under a plan that
// differs in any metric, plugin, version or eps0, or in their order.
func PoolBinding(pool, travel string, metrics []Binding) Binding {
	h := sha256.New()
	for _, m := range metrics {
		info := m.info()
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(info))))
		h.Write(info)
	}
	b := Binding{Metric: pool, Plugin: travel, Version: hex.EncodeToString(h.Sum(nil))}
	if len(metrics) > 0 {
		b.Epoch, b.Period = metrics[0].Epoch, metrics[0].Period
	}
	return b
}
