package client_test

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/blanket-dp/blanket/sdk/client"
)

// TestOutboxFileMode checks that the outbox, which holds the values of
// open periods in clear, is readable by its owner only: a new file and
// its WAL and shared-memory files are created 0600, and an existing file
// left 0644 by an earlier version, with its WAL and shared-memory files,
// is set to 0600 when opened.
func TestOutboxFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix file modes")
	}
	ctx := context.Background()
	mode := func(path string) fs.FileMode {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	t.Run("new", func(t *testing.T) {
		f := newFakeServer(t, nil)
		dir := t.TempDir()
		cfg, _ := clockConfig(f, dir)
		p := newProvider(t, cfg)
		if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, client.OutboxFile)
		for _, file := range []string{path, path + "-wal", path + "-shm"} {
			if m := mode(file); m != 0o600 {
				t.Errorf("%s has mode %v, want 0600", filepath.Base(file), m)
			}
		}
	})
	t.Run("existing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), client.OutboxFile)
		// Another connection keeps the WAL and shared-memory files open,
		// as another process on the outbox would.
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		files := []string{path, path + "-wal", path + "-shm"}
		for _, file := range files {
			if err := os.Chmod(file, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		o, err := client.OpenSQLiteOutbox(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		for _, file := range files {
			if m := mode(file); m != 0o600 {
				t.Errorf("%s has mode %v after opening, want 0600", filepath.Base(file), m)
			}
		}
	})
}

// TestModeFromEnvLogged checks that an unknown value of
// $BLANKET_TELEMETRY means ModeOff and is logged as a warning naming it,
// and that a known value is not logged.
func TestModeFromEnvLogged(t *testing.T) {
	for v, want := range map[string]client.Mode{"yes": client.ModeOff, "": client.ModeLocal, "on": client.ModeOn, "off": client.ModeOff} {
		t.Setenv(client.EnvMode, v)
		var logs logCapture
		if got := client.ModeFromEnvLogged(logs.logger()); got != want {
			t.Errorf("%s=%q: mode %v, want %v", client.EnvMode, v, got, want)
		}
		var lines int
		logs.mu.Lock()
		for _, b := range logs.buf.Bytes() {
			if b == '\n' {
				lines++
			}
		}
		logs.mu.Unlock()
		if v == "yes" {
			if lines != 1 {
				t.Errorf("%s=%q: %d log lines, want a warning", client.EnvMode, v, lines)
			}
			rs := logs.records(t, "blanket telemetry is off: "+client.EnvMode+" is not off, local or on")
			if len(rs) != 1 || rs[0]["level"] != "WARN" || rs[0]["value"] != v {
				t.Errorf("%s=%q: logged %v, want a warning naming the value", client.EnvMode, v, rs)
			}
		} else if lines != 0 {
			t.Errorf("%s=%q: %d log lines, want none", client.EnvMode, v, lines)
		}
	}
}
