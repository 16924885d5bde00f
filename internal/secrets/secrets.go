// Package secrets keeps the servers' secret files (the collector's report
// keys and plan-signing key, the batch token) and their data directories: files of mode 0600,
// created atomically, refused when others may read them.
package secrets

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
)

// TokenFile is the file, in a data directory, that holds the bearer token
// the shuffler presents to the collector's POST /v1/batches (mode 0600).
const TokenFile = "batch.token"

// Errors.
var (
	// ErrSecretFile reports a key or token file that cannot be used: wrong
	// permissions or content.
	ErrSecretFile = errors.New("secrets: unusable secret file")
	// ErrNoDir reports an empty data directory name.
	ErrNoDir = errors.New("secrets: data directory is empty")
)

// EnsureDir creates the data directory dir (mode 0700) if it does not
// exist.
func EnsureDir(dir string) error {
	if dir == "" {
		return ErrNoDir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("secrets: data directory: %w", err)
	}
	return nil
}

// Read reads a secret file, without its surrounding spaces, refusing one
// that others may read: an error wrapping ErrSecretFile then, one
// "secrets: reading PATH: ..." when the file cannot be read.
func Read(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: reading %s: %w", path, err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o, readable by others; run chmod 600 %s", ErrSecretFile, path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: reading %s: %w", path, err)
	}
	return []byte(strings.TrimSpace(string(b))), nil
}

// LoadOrCreate returns the content of the secret file path (Read),
// writing fresh() there first when no file is (CreateIfMissing), and
// reports whether this call created it. The caller decodes the content.
func LoadOrCreate(path string, fresh func() ([]byte, error)) (content []byte, created bool, err error) {
	if created, err = CreateIfMissing(path, fresh); err != nil {
		return nil, false, err
	}
	if content, err = Read(path); err != nil {
		return nil, false, err
	}
	return content, created, nil
}

// Create writes content to path (mode 0600) unless path exists: it
// writes a temporary file, syncs it and hard-links it into place, so that a
// crash never leaves a partial file and two processes racing to create the
// same secret agree on one. It reports whether this call created the file.
func Create(path string, content []byte) (bool, error) {
	tmp, err := writeTemp(path, content)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	syncDir(filepath.Dir(path))
	return true, nil
}

// CreateIfMissing writes fresh() to path (Create) when no file is there
// and reports whether this call created it. An error of fresh comes back
// as it is, one of Create as "secrets: writing PATH: ...".
func CreateIfMissing(path string, fresh func() ([]byte, error)) (bool, error) {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	content, err := fresh()
	if err != nil {
		return false, err
	}
	created, err := Create(path, content)
	if err != nil {
		return false, fmt.Errorf("secrets: writing %s: %w", path, err)
	}
	return created, nil
}

// LoadOrCreateToken returns the bearer token in path, writing a new random
// one (32 bytes, base64url) when the file does not exist. It reports whether
// the token was created.
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	created, err = CreateIfMissing(path, func() ([]byte, error) {
		var b [32]byte
		rand.Read(b[:])
		return []byte(base64.RawURLEncoding.EncodeToString(b[:])), nil
	})
	if err != nil {
		return "", false, err
	}
	token, err = LoadToken(path)
	return token, created, err
}

// LoadToken returns the bearer token in path. A token file readable by
// group or others, or an empty one, is refused.
func LoadToken(path string) (string, error) {
	b, err := Read(path)
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		return "", fmt.Errorf("%w: %s is empty", ErrSecretFile, path)
	}
	return string(b), nil
}

// Replace writes content to path (mode 0600), replacing the file there:
// it writes a temporary file, syncs it and renames it into place, so that
// a crash leaves the old file or the new one, never a partial one.
func Replace(path string, content []byte) error {
	tmp, err := writeTemp(path, content)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// Remove removes the secret file at path and syncs its directory, so that
// the removal survives a crash. It unlinks the file only: its bytes may
// remain in the disk's free blocks and in snapshots or backups.
func Remove(path string) error {
	if err := os.Remove(path); err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// writeTemp writes content and a newline to a new temporary file (mode
// 0600) beside path, synced and closed, and returns its name; the caller
// moves it into place and removes the name.
func writeTemp(path string, content []byte) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return "", err
	}
	name := tmp.Name()
	fail := func(err error) (string, error) {
		tmp.Close()
		os.Remove(name)
		return "", err
	}
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		return fail(err)
	}
	if _, err := tmp.Write(append(content, '\n')); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// syncDir syncs directory dir, so that a file linked or renamed into it
// survives a crash (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
