package issuer_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/sdk/report"
)

// An instance gets one token of a pool key; the shuffler verifies it; a
// second request of the same instance for the same pool key is refused.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "issuer-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	seed, _, err := issuer.LoadOrCreateSeed(dir)
	if err != nil {
		log.Fatal(err)
	}
	day := report.Period{Start: 20000 * 86400, Length: 86400}
	is, err := issuer.New(ctx, issuer.Options{Seed: seed, Dir: dir, Now: func() time.Time { return time.Unix(day.Start+3600, 0) }})
	if err != nil {
		log.Fatal(err)
	}
	defer is.Close()
	pool := report.PeriodPoolKey("ui/screen", "0123456789abcdef", day)
	device := auth.Identity{Issuer: "https://idp.example", Subject: "device-1"}

	// The app.
	pending, req, err := admission.Blind([]string{pool})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := is.Issue(ctx, device, req) // over HTTP: is.Handler
	if err != nil {
		log.Fatal(err)
	}
	tokens, err := admission.Finalize(pending, resp)
	if err != nil {
		log.Fatal(err)
	}

	// The shuffler.
	v, err := issuer.NewVerifier(seed)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verify:", v.Verify(pool, tokens[0]))

	// The same instance again, for the same pool key.
	_, again, _ := admission.Blind([]string{pool})
	resp, err = is.Issue(ctx, device, again)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second request:", resp.Evaluations[0].Refused)
	// Output:
	// verify: <nil>
	// second request: already_granted
}
