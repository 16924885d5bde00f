package collector

import (
	"encoding/base64"
	"fmt"
	"path/filepath"

	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/sdk/report"
)

// KeyFile is the file, in the collector's data directory, that holds its
// HPKE private key (base64, mode 0600) with the SQLite store.
const KeyFile = "collector.key"

// LoadOrCreateKey returns the collector's private key from dir/KeyFile,
// generating one (report.GenerateKey) on first use. It reports whether the
// key was created. A key file readable by group or others is refused.
func LoadOrCreateKey(dir string) (key *report.PrivateKey, created bool, err error) {
	path := filepath.Join(dir, KeyFile)
	b, created, err := secrets.LoadOrCreate(path, func() ([]byte, error) {
		priv, _, err := report.GenerateKey()
		if err != nil {
			return nil, fmt.Errorf("collector: generating key: %w", err)
		}
		return []byte(base64.StdEncoding.EncodeToString(priv)), nil
	})
	if err != nil {
		return nil, false, err
	}
	raw, err := base64.StdEncoding.DecodeString(string(b))
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s is not base64: %v", secrets.ErrSecretFile, path, err)
	}
	key, err = report.ParsePrivateKey(raw)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", secrets.ErrSecretFile, path, err)
	}
	return key, created, nil
}
