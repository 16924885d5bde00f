package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// maxAppDeps bounds the packages an app links through sdk/client
// (go list -deps, the standard library's included): 222 when this test was
// written, against 416 when the app SDK linked the plugin host and the
// accountant; 241 with the admission client (package admission and
// circl's OPRF). The margin leaves room for small additions; a new
// dependency tree of a hundred packages fails it.
const maxAppDeps = 280

// forbiddenAppDeps are the import paths (a trailing "/" means the path and
// everything under it) that sdk/client must not link by default: gRPC and
// protobuf, go-plugin and its logger, gonum and Google's
// differential-privacy library (through the laplace randomizer), Blanket's
// own accountant, plugin host, transport and plan calibration, and the
// server half of admission tokens (the issuer, its JWT check and go-jose):
// an app links only package admission, the OPRF client.
// An app opts into them through Config.Randomizers (see
// DefaultRandomizers).
var forbiddenAppDeps = []string{
	"google.golang.org/grpc/",
	"google.golang.org/protobuf/",
	"github.com/hashicorp/",
	"gonum.org/v1/gonum/",
	"github.com/google/differential-privacy/",
	"github.com/blanket-dp/blanket/accountant",
	"github.com/blanket-dp/blanket/plugins/laplace",
	"github.com/blanket-dp/blanket/plugins/builtin",
	"github.com/blanket-dp/blanket/sdk/plugin",
	"github.com/blanket-dp/blanket/sdk/rpc",
	"github.com/blanket-dp/blanket/sdk/proto/",
	"github.com/blanket-dp/blanket/sdk/plan/accounting",
	"github.com/blanket-dp/blanket/admission/issuer",
	"github.com/blanket-dp/blanket/admission/auth",
	"github.com/go-jose/",
}

// TestAppDependenciesStayLight lists what sdk/client links (go list
// -deps) and fails on any forbidden package and on more than maxAppDeps
// packages.
func TestAppDependenciesStayLight(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/blanket-dp/blanket/sdk/client").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, f := range forbiddenAppDeps {
			if d == strings.TrimSuffix(f, "/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(d, f)) {
				t.Errorf("sdk/client links %s (forbidden: %s)", d, f)
			}
		}
	}
	if len(deps) > maxAppDeps {
		t.Errorf("sdk/client links %d packages, more than %d", len(deps), maxAppDeps)
	}
}
