package servertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

// getClient is the client of FetchBody: a test's own, with a timeout.
var getClient = &http.Client{Timeout: 10 * time.Second}

// FetchBody and FetchJSON are GetJSON's kin for goroutines and retry
// loops, where a test cannot fail at once: they return the error.

// FetchBody GETs url into *body; an answer other than 200 is an error
// naming the URL, the status and the start of the answer.
func FetchBody(ctx context.Context, url string, body *[]byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := getClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, b)
	}
	*body = b
	return nil
}

// FetchJSON GETs url and decodes its JSON answer into v.
func FetchJSON(ctx context.Context, url string, v any) error {
	var b []byte
	if err := FetchBody(ctx, url, &b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// ExpireLeases ends every lease on an outgoing batch in the shufflers'
// PostgreSQL database dbURL, as a minute passing would, and returns how
// many it ended.
func ExpireLeases(ctx context.Context, dbURL string) (int64, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	tag, err := conn.Exec(ctx, `UPDATE blanket_shuffler.outgoing SET lease_until = '-infinity' WHERE lease_until > now()`)
	return tag.RowsAffected(), err
}
