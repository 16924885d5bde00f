package collector

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/blanket-dp/blanket/sdk/report"
)

// Files in a data directory.
const (
	// KeyFile holds the collector's HPKE private key (base64, mode 0600).
	KeyFile = "collector.key"
	// TokenFile holds the bearer token the shuffler presents to the
	// collector's POST /v1/batches (mode 0600).
	TokenFile = "batch.token"
	// ShufflerDB is the shuffler's SQLite database.
	ShufflerDB = "shuffler.db"
	// CollectorDB is the collector's SQLite database.
	CollectorDB = "collector.db"
)

// EnsureDir creates the data directory dir (mode 0700) if it does not
// exist.
func EnsureDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: data directory is empty", ErrOptions)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("collector: data directory: %w", err)
	}
	return nil
}

// readSecret reads a secret file, refusing one that others may read.
func readSecret(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o, readable by others; run chmod 600 %s", ErrSecretFile, path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return []byte(strings.TrimSpace(string(b))), nil
}

// createSecret writes content to path (mode 0600) unless path exists: it
// writes a temporary file, syncs it and hard-links it into place, so that a
// crash never leaves a partial file and two processes racing to create the
// same secret agree on one. It reports whether this call created the file.
func createSecret(path string, content []byte) (bool, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return false, err
	}
	if _, err := tmp.Write(append(content, '\n')); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return true, nil
}

// LoadOrCreateKey returns the collector's private key from dir/KeyFile,
// generating one (report.GenerateKey) on first use. It reports whether the
// key was created. A key file readable by group or others is refused.
func LoadOrCreateKey(dir string) (key *report.PrivateKey, created bool, err error) {
	path := filepath.Join(dir, KeyFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		priv, _, err := report.GenerateKey()
		if err != nil {
			return nil, false, fmt.Errorf("collector: generating key: %w", err)
		}
		created, err = createSecret(path, []byte(base64.StdEncoding.EncodeToString(priv)))
		if err != nil {
			return nil, false, fmt.Errorf("collector: writing %s: %w", path, err)
		}
	}
	b, err := readSecret(path)
	if err != nil {
		if errors.Is(err, ErrSecretFile) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("collector: reading key: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(string(b))
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s is not base64: %v", ErrSecretFile, path, err)
	}
	key, err = report.ParsePrivateKey(raw)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrSecretFile, path, err)
	}
	return key, created, nil
}

// LoadOrCreateToken returns the bearer token in path, writing a new random
// one (32 bytes, base64url) when the file does not exist. It reports whether
// the token was created.
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		var b [32]byte
		rand.Read(b[:])
		created, err = createSecret(path, []byte(base64.RawURLEncoding.EncodeToString(b[:])))
		if err != nil {
			return "", false, fmt.Errorf("collector: writing %s: %w", path, err)
		}
	}
	token, err = LoadToken(path)
	return token, created, err
}

// LoadToken returns the bearer token in path. A token file readable by
// group or others, or an empty one, is refused.
func LoadToken(path string) (string, error) {
	b, err := readSecret(path)
	if err != nil {
		if errors.Is(err, ErrSecretFile) {
			return "", err
		}
		return "", fmt.Errorf("collector: reading token: %w", err)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("%w: %s is empty", ErrSecretFile, path)
	}
	return string(b), nil
}
