package issuer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	"github.com/blanket-dp/blanket/internal/httpserver"
)

// Authenticator names the app instance behind a bearer token
// (auth.Authenticator does, from a JWT).
type Authenticator interface {
	Authenticate(ctx context.Context, bearer string) (auth.Identity, error)
}

// Handler returns the HTTP handler of POST admission.TokensPath (the
// wire format is in package admission): it authenticates the bearer
// token with a, reads the request, and answers what Issue returns, after
// Issue committed the grants. Errors are answered as
// {"error": "<reason>"}: 401 for a token a refuses (503 when a's key set
// is unavailable, auth.ErrKeysUnavailable), 400, 405, 413, 415 for a
// request that is not one, 503 when the store fails.
func (is *Issuer) Handler(a Authenticator) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(admission.TokensPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			httpserver.WriteError(w, http.StatusMethodNotAllowed, "method %s, want POST", r.Method)
			return
		}
		is.serveTokens(w, r, a)
	})
	return mux
}

// serveTokens serves one request to TokensPath.
func (is *Issuer) serveTokens(w http.ResponseWriter, r *http.Request, a Authenticator) {
	bearer, ok := bearerToken(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="blanket admission"`)
		httpserver.WriteError(w, http.StatusUnauthorized, "no bearer token (Authorization: Bearer <JWT>)")
		return
	}
	id, err := a.Authenticate(r.Context(), bearer)
	if errors.Is(err, auth.ErrKeysUnavailable) {
		httpserver.WriteError(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="blanket admission", error="invalid_token"`)
		httpserver.WriteError(w, http.StatusUnauthorized, "%v", err)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			httpserver.WriteError(w, http.StatusUnsupportedMediaType, "content type %q, want application/json", ct)
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, admission.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			httpserver.WriteError(w, http.StatusRequestEntityTooLarge, "body over %d bytes", admission.MaxBodyBytes)
			return
		}
		httpserver.WriteError(w, http.StatusBadRequest, "reading body: %v", err)
		return
	}
	var req admission.TokenRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		httpserver.WriteError(w, http.StatusBadRequest, "body is not a token request: %v", err)
		return
	}
	if dec.More() {
		httpserver.WriteError(w, http.StatusBadRequest, "body holds more than one JSON value")
		return
	}
	if n := len(req.Requests); n == 0 || n > admission.MaxRequests {
		httpserver.WriteError(w, http.StatusBadRequest, "%d requests, want 1 to %d", n, admission.MaxRequests)
		return
	}
	resp, err := is.Issue(r.Context(), id, &req)
	if err != nil {
		is.o.Logger.Error("granting tokens", "err", err)
		httpserver.WriteError(w, http.StatusServiceUnavailable, "the issuer's store failed; send the same request again later")
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, resp)
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header (the scheme in any case).
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}
