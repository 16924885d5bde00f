//go:build linux

package plugin_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/blanket-dp/blanket/sdk/plugin"
)

// TestPluginEnvironment: a plugin process gets PATH and the variables
// named by WithEnv, and none of the host's others: not a database
// password in BLANKET_STORE. Read from the running process's
// /proc/PID/environ.
func TestPluginEnvironment(t *testing.T) {
	t.Setenv("BLANKET_STORE", "postgres://blanket:s3cret@db/blanket")
	t.Setenv("BLANKET_TEST_PLUGIN_WANTED", "yes")
	t.Setenv("BLANKET_TEST_PLUGIN_UNWANTED", "no")
	p := openTest(t, nil, plugin.WithEnv("BLANKET_TEST_PLUGIN_WANTED"))
	pid := plugin.PID(p)
	if pid == 0 {
		t.Fatal("no plugin process")
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(raw, []byte{0}) {
		if k, v, ok := bytes.Cut(kv, []byte("=")); ok {
			env[string(k)] = string(v)
		}
	}
	for _, leak := range []string{"BLANKET_STORE", "BLANKET_TEST_PLUGIN_UNWANTED"} {
		if v, ok := env[leak]; ok {
			t.Errorf("the plugin process has %s=%q from the host", leak, v)
		}
	}
	if env["BLANKET_TEST_PLUGIN_WANTED"] != "yes" {
		t.Errorf("BLANKET_TEST_PLUGIN_WANTED (WithEnv) = %q, want yes", env["BLANKET_TEST_PLUGIN_WANTED"])
	}
	if env["PATH"] != os.Getenv("PATH") {
		t.Errorf("PATH = %q, want the host's", env["PATH"])
	}
}
