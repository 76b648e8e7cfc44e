package devicelogin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/filelock"
	"github.com/cotal-ai/cotal/oidc"
)

// ErrNoSession is wrapped by Store.Load when no session is stored for the issuer.
var ErrNoSession = errors.New("no login session")

// Store keeps one session per issuer as a JSON file (0600) in Dir (0700), named by a hash
// of the normalized issuer URL. Writes are atomic (temp file, fsync, rename).
type Store struct {
	Dir string // folder of the session files; required
}

// NormalizeIssuer checks issuer with oidc.CheckIssuer and returns the form sessions are
// keyed by: scheme and host lower-cased, default port and trailing slashes dropped.
func NormalizeIssuer(issuer string) (string, error) {
	if err := oidc.CheckIssuer(issuer); err != nil {
		return "", err
	}
	u, err := url.Parse(issuer)
	if err != nil {
		return "", fmt.Errorf("issuer %q: %w", issuer, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	switch {
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		u.Host = "[" + host + "]"
	default:
		u.Host = host
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// Path returns the session file of issuer: <Dir>/<first 32 hex digits of sha256(normalized issuer)>.json.
func (s Store) Path(issuer string) (string, error) {
	if s.Dir == "" {
		return "", errors.New("login store: no folder")
	}
	n, err := NormalizeIssuer(issuer)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(n))
	return filepath.Join(s.Dir, hex.EncodeToString(sum[:16])+".json"), nil
}

// Load reads the session of issuer; it wraps ErrNoSession when there is none.
func (s Store) Load(issuer string) (*Session, error) {
	p, err := s.Path(issuer)
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load session of %s: %w", issuer, ErrNoSession)
	}
	if err != nil {
		return nil, fmt.Errorf("load session of %s: %w", issuer, err)
	}
	var sess Session
	if err := json.Unmarshal(b, &sess); err != nil {
		return nil, fmt.Errorf("load session %s: %w", p, err)
	}
	want, _ := NormalizeIssuer(issuer) // checked by Path
	if got, err := NormalizeIssuer(sess.Issuer); err != nil || got != want || sess.IDToken == "" {
		return nil, fmt.Errorf("load session %s: not a session of %s", p, issuer)
	}
	return &sess, nil
}

// Save writes sess atomically as the session of sess.Issuer, replacing any earlier one.
func (s Store) Save(sess *Session) error {
	p, err := s.Path(sess.Issuer)
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	if err := s.mkdir(); err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	b, err := json.MarshalIndent(sess, "", "  ")
	if err != nil {
		return fmt.Errorf("save session: encode: %w", err)
	}
	if err := writeAtomic(p, append(b, '\n')); err != nil {
		return fmt.Errorf("save session of %s: %w", sess.Issuer, err)
	}
	return nil
}

// mkdir makes the login folder, or narrows an existing one, to mode 0700.
func (s Store) mkdir() error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(s.Dir, 0o700)
}

// lock takes the exclusive lock of issuer's session, an flock on <session>.lock, waiting
// for it until ctx ends. Processes that refresh one session take turns, so a refresh token
// the provider rotates is spent once.
func (s Store) lock(ctx context.Context, issuer string) (unlock func(), err error) {
	p, err := s.Path(issuer)
	if err != nil {
		return nil, fmt.Errorf("lock session: %w", err)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock session: %w", err)
	}
	f, err := os.OpenFile(p+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock session of %s: %w", issuer, err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := filelock.TryLock(f)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("lock session of %s: %w", issuer, err)
		}
		if ok {
			return func() { _ = f.Close() }, nil // closing the file releases the lock
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for the session lock of %s (another cotal process refreshes it): %w", issuer, ctx.Err())
		case <-tick.C:
		}
	}
}

// Remove deletes the session of issuer; no session is not an error.
func (s Store) Remove(issuer string) error {
	p, err := s.Path(issuer)
	if err != nil {
		return fmt.Errorf("remove session: %w", err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove session of %s: %w", issuer, err)
	}
	return nil
}

// writeAtomic writes b to a 0600 temp file beside p, syncs it, and renames it over p.
func writeAtomic(p string, b []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(p), ".session-*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name()) // the temp file is garbage either way; err says why
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}
