package main

import (
	"encoding/json"
	"net/http"
	"testing"
)

// getJSONTest GETs url (with the horizon) into v and returns the status.
func getJSONTest(t testing.TB, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}
