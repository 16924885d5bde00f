package report

import (
	"errors"
	"testing"
)

// TestPeriodBinding: a report sealed for one period opens under that
// period only (no replay into another period's batch), and a binding
// without a period neither seals nor opens.
func TestPeriodBinding(t *testing.T) {
	priv, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := ParsePublicKey(pub)
	sk, _ := ParsePrivateKey(priv)
	day := Period{Start: 20412 * 86400, Length: 86400}
	bind := Binding{Metric: "m", Plugin: "krr", Version: "1", Eps0: 2, Epoch: "0123456789abcdef", Period: day}
	sealed, err := Seal(pk, bind, []byte("r"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(sk, bind, sealed); err != nil {
		t.Fatalf("same period: %v", err)
	}
	for _, p := range []Period{{Start: day.Start + 86400, Length: 86400}, {Start: day.Start, Length: 43200}} {
		other := bind
		other.Period = p
		if _, err := Open(sk, other, sealed); !errors.Is(err, ErrOpen) {
			t.Errorf("period %v: err = %v, want ErrOpen", p, err)
		}
	}
	none := bind
	none.Period = Period{}
	if _, err := Open(sk, none, sealed); !errors.Is(err, ErrOpen) || !errors.Is(err, ErrNoPeriod) {
		t.Errorf("open without a period: err = %v, want ErrOpen and ErrNoPeriod", err)
	}
	if _, err := Seal(pk, none, []byte("r")); !errors.Is(err, ErrNoPeriod) {
		t.Errorf("seal without a period: err = %v, want ErrNoPeriod", err)
	}
	// The HPKE info, period included: the wire format (a change would
	// leave every report sealed so far unopenable).
	if got, want := string(sealInfo(bind, "00112233aabbccdd")), "blanket/report/v3\x00m\x00krr\x001\x002\x000123456789abcdef\x00period=1763596800+86400\x00key=00112233aabbccdd"; got != want {
		t.Errorf("info = %q, want %q", got, want)
	}
	// A pooled message's binding carries the period too.
	pb := PoolBinding("@joint", "joint", []Binding{bind})
	if pb.Period != day {
		t.Errorf("pool binding period %v, want %v", pb.Period, day)
	}
}

func TestParsePeriodAndPoolKey(t *testing.T) {
	day := Period{Start: 1763856000, Length: 86400}
	key := PeriodPoolKey("ui/screen", "0123456789abcdef", day)
	if key != "ui/screen#0123456789abcdef#1763856000+86400" {
		t.Fatalf("key %q", key)
	}
	pool, epoch, p, err := ParsePoolKey(key)
	if err != nil || pool != "ui/screen" || epoch != "0123456789abcdef" || p != day || p.End() != day.Start+86400 {
		t.Fatalf("ParsePoolKey = %q %q %v %v", pool, epoch, p, err)
	}
	// Without a period tag: refused, naming it.
	for _, k := range []string{"ui/screen", "ui/screen#0123456789abcdef", ""} {
		if _, _, _, err := ParsePoolKey(k); !errors.Is(err, ErrNoPeriod) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err %v; want ErrNoPeriod and ErrMalformed", k, err)
		}
	}
	// An empty epoch parses: the shuffler and the collector refuse it.
	if pool, epoch, p, err := ParsePoolKey("ui/screen##" + day.String()); err != nil || pool != "ui/screen" || epoch != "" || p != day {
		t.Errorf("empty epoch: %q %q %v %v", pool, epoch, p, err)
	}
	for _, bad := range []string{"", "+", "1+", "+1", "1+0", "-86400+86400", "1+86400", "86400+-1", "0+99999999", "a+1", "1 +1", "99999999999999999999+1", "0+1+1", "00+1", "0+01"} {
		if _, err := ParsePeriod(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParsePeriod(%q): err = %v, want ErrMalformed", bad, err)
		}
		if _, _, _, err := ParsePoolKey("m#e#" + bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParsePoolKey(m#e#%s): err = %v, want ErrMalformed", bad, err)
		}
	}
}

func FuzzParsePoolKey(f *testing.F) {
	f.Add("ui/screen#0123456789abcdef#1763856000+86400")
	f.Add("a#b#0+1")
	f.Add("a")
	f.Fuzz(func(t *testing.T, key string) {
		pool, epoch, p, err := ParsePoolKey(key)
		if err != nil {
			return
		}
		if p.Valid() != nil {
			t.Fatalf("%q: invalid period %v accepted", key, p)
		}
		if again := PeriodPoolKey(pool, epoch, p); again != key {
			t.Fatalf("%q does not round trip: %q", key, again)
		}
	})
}
