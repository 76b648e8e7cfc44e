package authsvc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/trust"
)

// SentinelFile, in a space's state folder, is the space's deny-all sentinel user as a
// standard NATS creds file (0600), the name the reference gives it
// (<state>/sentinel.creds): any NATS client connects with it plus a Cotal bearer as its
// token. Enable and the auth service write it; Go clients read it.
const SentinelFile = "sentinel.creds"

// WriteSentinel writes creds as dir's SentinelFile (0600, atomically) unless it already
// holds exactly them.
func WriteSentinel(dir string, creds []byte) error {
	path := filepath.Join(dir, SentinelFile)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, creds) {
		return nil
	}
	if err := atomicfile.WriteFile(path, creds, 0o600); err != nil {
		return fmt.Errorf("write sentinel creds %s: %w", path, err)
	}
	return nil
}

// ReadSentinel reads dir's SentinelFile and checks it holds a user JWT and seed. A missing
// file is an error wrapping fs.ErrNotExist.
func ReadSentinel(dir string) ([]byte, error) {
	path := filepath.Join(dir, SentinelFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sentinel creds: %w", err)
	}
	if _, err := trust.ReadCreds(b); err != nil {
		return nil, fmt.Errorf("sentinel creds %s: %w", path, err)
	}
	return b, nil
}
