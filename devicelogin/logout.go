package devicelogin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cotal-ai/cotal/internal/redact"
	"github.com/cotal-ai/cotal/oidc"
)

// Kept is one login session the store holds, as cotal logout lists it: never a token.
type Kept struct {
	IdP  string `json:"idp"`  // the issuer (oidc) or the IdP's base URL (reference)
	Kind string `json:"kind"` // "oidc" or "reference"
	Sub  string `json:"subject,omitempty"`
	Path string `json:"file"` // the file it is kept in
}

// List returns every session the store holds, OIDC sessions by issuer and reference
// sessions by base URL, sorted by IdP. A session file that cannot be read is listed
// by its file name alone, so it can still be removed.
func (s Store) List() ([]Kept, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("login sessions: %w", err)
	}
	var out []Kept
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") || name == RefSessionsFile {
			continue
		}
		p := filepath.Join(s.Dir, name)
		k := Kept{Kind: "oidc", Path: p}
		if b, err := os.ReadFile(p); err == nil {
			var sess Session
			if json.Unmarshal(b, &sess) == nil {
				k.IdP, k.Sub = sess.Issuer, sess.Subject
			}
		}
		out = append(out, k)
	}
	f, p, err := s.readRef()
	if err != nil {
		return nil, fmt.Errorf("login sessions: %w", err)
	}
	for url, sess := range f.Sessions {
		out = append(out, Kept{IdP: url, Kind: "reference", Sub: sess.Sub, Path: p})
	}
	slices.SortFunc(out, func(a, b Kept) int { return strings.Compare(a.IdP+a.Path, b.IdP+b.Path) })
	return out, nil
}

// RemoveAll deletes every session the store holds (their lock files too).
func (s Store) RemoveAll() error {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove login sessions: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".json.lock")) {
			continue
		}
		if err := os.Remove(filepath.Join(s.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove login session: %w", err)
		}
	}
	return nil
}

// RemoveRef deletes the reference session of the IdP at url and reports whether there
// was one; the sessions file goes when it holds no other.
func (s Store) RemoveRef(url string) (bool, error) {
	key, err := oidc.NormalizeIdPURL(url)
	if err != nil {
		return false, fmt.Errorf("remove session: %w", err)
	}
	f, p, err := s.readRef()
	if err != nil {
		return false, fmt.Errorf("remove session: %w", err)
	}
	if _, ok := f.Sessions[key]; !ok {
		return false, nil
	}
	delete(f.Sessions, key)
	if len(f.Sessions) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("remove session of %s: %w", key, err)
		}
		return true, nil
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return false, fmt.Errorf("remove session: %w", err)
	}
	if err := writeAtomic(p, b); err != nil {
		return false, fmt.Errorf("remove session of %s: %w", key, err)
	}
	return true, nil
}

// RefSignOut ends the IdP session at POST <base>/sign-out (Authorization: Bearer
// <session>), as the reference's cotal logout does. ended is false when the IdP no longer
// knew the session (401: it expired or was ended before); any other answer but a 2xx is
// an error, and the session is then still live at the IdP.
func RefSignOut(ctx context.Context, cfg RefConfig, session string) (ended bool, err error) {
	base, err := oidc.NormalizeIdPURL(cfg.URL)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/sign-out", strings.NewReader("{}"))
	if err != nil {
		return false, fmt.Errorf("sign out at %s: %w", base, redact.RequestError(err))
	}
	req.Header.Set("Authorization", "Bearer "+session)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := cfg.config().httpClient().Do(req)
	if err != nil {
		return false, fmt.Errorf("sign out at %s: %w", base, redact.RequestError(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return false, nil
	case resp.StatusCode/100 != 2:
		return false, fmt.Errorf("sign out at %s/sign-out: status %s", base, resp.Status)
	}
	return true, nil
}
