package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/testbuild"
)

// unitFiles are the systemd units of systemd/, templates and drop-ins.
var unitFiles = []string{
	"systemd/blanket-shuffler@.service",
	"systemd/blanket-collector@.service",
	"systemd/blanket-issuer@.service",
	"systemd/haproxy.service.d/blanket.conf",
}

// TestSystemdUnitsVerify runs systemd-analyze verify on an instance of
// each template unit, with the blanket binary its ExecStart names, and
// on the haproxy drop-in within a unit of its own: any unknown key, bad
// value or missing binary is a warning, and fails the test.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd)")
	}
	bin := testbuild.Binary(t, "github.com/blanket-dp/blanket/cmd/blanket")
	dir := t.TempDir()
	for _, f := range unitFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		unit := strings.ReplaceAll(string(b), "/usr/local/bin/blanket", bin)
		inst := strings.Replace(filepath.Base(f), "@.", "@1.", 1)
		if strings.HasSuffix(f, ".conf") {
			// A drop-in: verified as part of a unit of its own.
			unit = "[Unit]\nDescription=drop-in check\n[Service]\nExecStart=/bin/true\n" + strings.Replace(unit, "[Service]\n", "", 1)
			inst = "dropin-check.service"
		}
		path := filepath.Join(dir, inst)
		if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, analyze, "verify", "--man=no", path).CombinedOutput()
		cancel()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", f, err, out)
		}
	}
}
