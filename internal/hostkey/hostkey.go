// Package hostkey loads the host key that envelope nonces are derived from
// (coordinator.DeriveNonce): the value of a configured environment
// variable, or a key file in data_dir created on first start. Hosts given
// the same key mint the same nonce for a session. The key never appears in
// an error.
package hostkey

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memhost/memhost/coordinator"
)

// FileName is the key file inside data_dir.
const FileName = "host.key"

// ErrWeak: the configured key is too short to keep nonces unguessable.
var ErrWeak = errors.New("host key too short")

// Load answers the host key: the value of the environment variable envName
// (read through lookupEnv, nil meaning os.LookupEnv) when envName is set,
// else the content of dataDir/host.key, which is created (mode 0600, 64
// random hex digits) if absent. Surrounding whitespace is not part of the
// key, so the file's content can be copied into the variable of other
// hosts.
func Load(dataDir, envName string, lookupEnv func(string) (string, bool)) ([]byte, error) {
	if envName != "" {
		if lookupEnv == nil {
			lookupEnv = os.LookupEnv
		}
		v, ok := lookupEnv(envName)
		if !ok {
			return nil, fmt.Errorf("host key: the environment variable %s (host_key_env) is not set", envName)
		}
		return check(strings.TrimSpace(v), "the environment variable "+envName)
	}
	path := filepath.Join(dataDir, FileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return create(path)
	}
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	return check(strings.TrimSpace(string(data)), path)
}

func check(key, source string) ([]byte, error) {
	if len(key) < coordinator.MinHostKeyBytes {
		return nil, fmt.Errorf("host key in %s is %d bytes, at least %d are needed (for example `openssl rand -hex 32`): %w",
			source, len(key), coordinator.MinHostKeyBytes, ErrWeak)
	}
	return []byte(key), nil
}

// create writes a new key file. O_EXCL: of two hosts starting on one
// data_dir at once, the second reads the first's key instead of
// overwriting it.
func create(path string) ([]byte, error) {
	key := []byte(hex.EncodeToString(coordinator.NewHostKey()))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return Load(filepath.Dir(path), "", nil)
	}
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	_, err = f.Write(append(key, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // a torn key file would fail every later start
		return nil, fmt.Errorf("host key: %w", err)
	}
	return key, nil
}
