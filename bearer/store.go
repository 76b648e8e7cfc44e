package bearer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// File and folder modes of the key folder: secrets are readable by their owner only.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// fileVersion is the format version written into every key file.
const fileVersion = 1

// ErrCorrupt is wrapped by every error about a key file that exists but cannot be used.
// Nothing is regenerated over such a file: a new issuer key would void every bearer, and a
// new owner secret would re-key every owner.
var ErrCorrupt = errors.New("corrupt key file")

// Store keeps the secrets of an auth service by key, a slash-separated relative path
// ("issuer.json", "space.74/owner-secret.json"). Secrets are created once and never
// replaced: Create refuses a key that exists. FileStore is the default; an embedder may
// keep them in a vault instead.
type Store interface {
	// Get returns the value of key, or an error wrapping fs.ErrNotExist.
	Get(key string) ([]byte, error)
	// Create stores value under key only if key is absent, or returns an error wrapping
	// fs.ErrExist. Two creators racing end with one value.
	Create(key string, value []byte) error
}

// FileStore is a Store of files under Dir: 0600 files in 0700 folders, created atomically
// and create-only.
type FileStore struct{ Dir string }

// path is the file of key, refusing keys that leave Dir.
func (s FileStore) path(key string) (string, error) {
	if key == "" || !filepath.IsLocal(filepath.FromSlash(key)) {
		return "", fmt.Errorf("secret key %q: want a relative path inside the store", key)
	}
	return filepath.Join(s.Dir, filepath.FromSlash(key)), nil
}

// Get implements Store.
func (s FileStore) Get(key string) ([]byte, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return b, nil
}

// Create implements Store.
func (s FileStore) Create(key string, value []byte) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), dirMode); err != nil {
		return fmt.Errorf("create folder of %s: %w", p, err)
	}
	return atomicfile.CreateFile(p, value, fileMode)
}

// Within is the view of store under prefix: key k of the view is prefix/k in store.
func Within(store Store, prefix string) Store { return prefixed{store, prefix} }

type prefixed struct {
	s      Store
	prefix string
}

func (p prefixed) Get(key string) ([]byte, error)        { return p.s.Get(p.prefix + "/" + key) }
func (p prefixed) Create(key string, value []byte) error { return p.s.Create(p.prefix+"/"+key, value) }

// loadOrCreate decodes the JSON value of key in store into v. When the key is missing it
// calls fresh for a new value and creates it, create-only: when two processes race, both
// end up reading the one that won. check validates what was read.
func loadOrCreate(store Store, key string, v any, fresh func() (any, error), check func() error) error {
	for range 2 {
		b, err := store.Get(key)
		if err == nil {
			if err := json.Unmarshal(b, v); err != nil {
				return fmt.Errorf("%w %s: %v; move it aside only if no bearer or owner depends on it", ErrCorrupt, key, err)
			}
			if err := check(); err != nil {
				return fmt.Errorf("%w %s: %v", ErrCorrupt, key, err)
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		nv, err := fresh()
		if err != nil {
			return fmt.Errorf("create %s: %w", key, err)
		}
		b, err = json.MarshalIndent(nv, "", "  ")
		if err != nil {
			return fmt.Errorf("encode %s: %w", key, err)
		}
		if err := store.Create(key, append(b, '\n')); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		// Created, or lost a race to another creator: read back what is there.
	}
	return fmt.Errorf("read %s: secret vanished while being created", key)
}
