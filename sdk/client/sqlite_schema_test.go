package client_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk/client"
)

// TestOutboxRefusesOtherVersions: an outbox file of a schema version
// written by a pre-release SDK (1 to 7), or by a newer client, is refused
// when opened with an error that says which, and left as it was; a file
// of the current version opens again.
func TestOutboxRefusesOtherVersions(t *testing.T) {
	ctx := context.Background()
	for v, want := range map[int]string{1: "pre-release", 2: "pre-release", 7: "pre-release", 9: "newer"} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), client.OutboxFile)
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE outbox (seq INTEGER PRIMARY KEY); PRAGMA user_version = %d", v)); err != nil {
				t.Fatal(err)
			}
			o, err := client.OpenSQLiteOutbox(ctx, path)
			if err == nil {
				o.Close()
				t.Fatalf("a file of schema version %d opened", v)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", v)) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q, want it to name version %d and say %q", err, v, want)
			}
			var got int
			if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&got); err != nil || got != v {
				t.Fatalf("user_version %d, %v after the refusal; want %d", got, err, v)
			}
		})
	}
	path := filepath.Join(t.TempDir(), client.OutboxFile)
	for range 2 {
		o, err := client.OpenSQLiteOutbox(ctx, path)
		if err != nil {
			t.Fatalf("a file of the current version: %v", err)
		}
		o.Close()
	}
}
