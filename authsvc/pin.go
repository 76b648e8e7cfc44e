package authsvc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/oidc"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// PinFile, in a space's state folder, marks the space as a user-auth space and pins the
// IdP whose people it admits. It is written once and never re-pointed: owners are derived
// from the IdP's issuer and subjects, so another IdP would re-key every owner.
const PinFile = "idp.json"

// pinVersion is the format version of PinFile.
const pinVersion = 1

// ErrNotUserAuth is wrapped by ReadPin when the space has no PinFile: it is a plain
// authenticated space whose peers hold static creds.
var ErrNotUserAuth = errors.New("not a user-auth space")

// Pin is the content of PinFile.
type Pin struct {
	Version  int    `json:"ver"`
	Space    string `json:"space"`
	Issuer   string `json:"issuer"`   // the OIDC issuer URL, exactly as in its ID tokens
	ClientID string `json:"clientId"` // the audience its ID tokens must name
}

// check validates a pin read from disk or about to be written.
func (p Pin) check() error {
	switch {
	case p.Version != pinVersion:
		return fmt.Errorf("version %d: want %d", p.Version, pinVersion)
	case protocol.CheckSpace(p.Space) != nil:
		return protocol.CheckSpace(p.Space)
	case oidc.CheckIssuer(p.Issuer) != nil:
		return oidc.CheckIssuer(p.Issuer)
	case p.ClientID == "":
		return errors.New("no client id")
	}
	return nil
}

// ReadPin reads the pin of space from the trust folder chainDir. A space without one gets
// an error wrapping ErrNotUserAuth; a pin that does not decode is an error naming the file.
func ReadPin(chainDir, space string) (Pin, error) {
	path := filepath.Join(StateDir(chainDir, space), PinFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Pin{}, fmt.Errorf("space %q: %w (no %s; `cotal up --user-auth --idp <issuer URL> --space %s` makes it one)", space, ErrNotUserAuth, path, space)
	}
	if err != nil {
		return Pin{}, fmt.Errorf("read %s: %w", path, err)
	}
	var p Pin
	if err := json.Unmarshal(b, &p); err != nil {
		return Pin{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := p.check(); err != nil {
		return Pin{}, fmt.Errorf("%s: %w", path, err)
	}
	if p.Space != space {
		return Pin{}, fmt.Errorf("%s: pins space %q, not %q", path, p.Space, space)
	}
	return p, nil
}

// Enable makes space a user-auth space trusting the IdP issuer for clientID: it writes the
// pin (create-only), then creates what the auth service needs and does not yet exist: the
// callout account AUTH_<space> with its sentinel and xkey, the bearer issuer key and the
// owner secret. Enabling again with the same IdP changes nothing; naming another IdP is
// refused, since it would re-key every owner.
func Enable(chain *trust.Chain, space, issuer, clientID string) (Pin, error) {
	want := Pin{Version: pinVersion, Space: space, Issuer: issuer, ClientID: clientID}
	if err := want.check(); err != nil {
		return Pin{}, fmt.Errorf("user auth for %q: %w", space, err)
	}
	dir := StateDir(chain.Dir(), space)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Pin{}, fmt.Errorf("user auth for %q: state folder: %w", space, err)
	}
	b, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		return Pin{}, fmt.Errorf("user auth for %q: %w", space, err)
	}
	err = workspace.CreateFileAtomic(filepath.Join(dir, PinFile), append(b, '\n'), 0o600)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return Pin{}, fmt.Errorf("user auth for %q: %w", space, err)
	}
	got, err := ReadPin(chain.Dir(), space)
	if err != nil {
		return Pin{}, err
	}
	if got.Issuer != want.Issuer || got.ClientID != want.ClientID {
		return Pin{}, fmt.Errorf("space %q already trusts the IdP %s (client %s); re-pointing it to %s (client %s) would re-key every owner",
			space, got.Issuer, got.ClientID, want.Issuer, want.ClientID)
	}
	ua, err := chain.UserAuth(space)
	if err != nil {
		return Pin{}, err
	}
	if err := WriteSentinel(dir, ua.SentinelCreds()); err != nil {
		return Pin{}, fmt.Errorf("user auth for %q: %w", space, err)
	}
	if _, err := bearer.Load(dir, space); err != nil {
		return Pin{}, err
	}
	if _, err := bearer.LoadOwnerSecret(dir); err != nil {
		return Pin{}, err
	}
	return got, nil
}
