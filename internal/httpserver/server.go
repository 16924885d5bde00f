// Package httpserver is the HTTP plumbing the shuffler and the collector
// share: an http.Server that names no peer in its logs (New), the
// per-connection rate limiter the shuffler uses (ConnContext, ConnBucket),
// and JSON answers (WriteJSON, WriteError) and bounded request bodies
// (ReadBody).
package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"regexp"
	"time"
)

// WriteJSON writes v as JSON with the status code.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// errorBody is the JSON body of every error response.
type errorBody struct {
	// Error says what went wrong.
	Error string `json:"error"`
}

// WriteError writes {"error": message} with the status code.
func WriteError(w http.ResponseWriter, status int, format string, args ...any) {
	WriteJSON(w, status, errorBody{Error: fmt.Sprintf(format, args...)})
}

// ReadBody reads a request body of at most limit bytes. On failure it
// returns the status to answer (413 over the limit, 415 for another content
// type, 400 otherwise) and the reason.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/octet-stream" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content type %q, want application/octet-stream", ct)
	}
	if r.ContentLength > limit {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body of %d bytes, limit %d", r.ContentLength, limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// One byte more, for the read that sees EOF; no more than 64 MiB
		// up front for a length the sender may not keep to.
		buf.Grow(int(min(r.ContentLength+1, 64<<20)))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", limit)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("reading body: %v", err)
	}
	return body, http.StatusOK, nil
}

// recoverer turns a panic in a handler into a 500, logged without the
// request's address (net/http's own panic log would name it).
func recoverer(logger *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logger.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				WriteError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// addrRE matches the host:port forms net/http puts in its error log.
var addrRE = regexp.MustCompile(`(\[[0-9A-Fa-f:.%a-zA-Z]+\]|[0-9]{1,3}(\.[0-9]{1,3}){3}):[0-9]+`)

// redactingWriter feeds net/http's error log into slog with peer
// addresses removed: the shuffler keeps no client address, not even in
// logs.
type redactingWriter struct{ logger *slog.Logger }

func (rw redactingWriter) Write(p []byte) (int, error) {
	msg := addrRE.ReplaceAllString(string(p), "<addr>")
	rw.logger.Warn("http server", "msg", trimNewline(msg))
	return len(p), nil
}

func trimNewline(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// New returns an http.Server for h with the settings both roles
// need: per-connection state for rate limiting (ConnContext), panics
// answered with 500 and logged without the peer's address, net/http's own
// error log redacted of addresses, and timeouts against slow clients
// (headers within 10 s, a whole request within 10 min, which a large batch
// may need; idle connections closed after 2 min).
func New(h http.Handler, logger *slog.Logger) *http.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           recoverer(logger, h),
		ConnContext:       ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(redactingWriter{logger}, "", 0),
	}
}
