package authsvc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/exchange"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/oidc"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
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

// Pin is the content of PinFile, in one of two forms.
//
// The reference's (implementations/auth/src/store.ts ensurePinnedIdp), written by `cotal
// up --user-auth --idp <base>` without --client-id: {ver, url, issuer, audience, jwksUri},
// issuer = audience = the origin of url, jwksUri = url + "/jwks"; ID tokens are checked
// by oidc.PinnedVerifier. ClientID is empty.
//
// Go's OIDC form, written with --client-id: {ver, space, issuer, clientId}; ID tokens are
// checked by oidc.Verifier with OIDC discovery from issuer, the client id as audience.
//
// Unknown fields are ignored on read, as the reference ignores them.
type Pin struct {
	Version  int    `json:"ver"`
	URL      string `json:"url,omitempty"`      // reference form: the IdP base URL (cotal login --idp)
	Space    string `json:"space,omitempty"`    // OIDC form: the space it pins
	Issuer   string `json:"issuer"`             // the exact iss of its ID tokens; owners derive from it
	Audience string `json:"audience,omitempty"` // reference form: the exact aud of its ID tokens
	JWKSURI  string `json:"jwksUri,omitempty"`  // reference form: the only place keys come from
	ClientID string `json:"clientId,omitempty"` // OIDC form: the audience its ID tokens must name
}

// OIDC reports whether p is Go's OIDC form (a client id, discovery), not the reference's.
func (p Pin) OIDC() bool { return p.ClientID != "" }

// LoginURL is what `cotal login --idp` takes for the pinned IdP: the base URL of a
// reference pin, the issuer of an OIDC pin.
func (p Pin) LoginURL() string {
	if p.OIDC() {
		return p.Issuer
	}
	return p.URL
}

// AudienceName is the audience its ID tokens name: the client id of an OIDC pin.
func (p Pin) AudienceName() string {
	if p.OIDC() {
		return p.ClientID
	}
	return p.Audience
}

// Verifier builds the checker of the pinned IdP's ID tokens.
func (p Pin) Verifier() exchange.IDTokenVerifier {
	if p.OIDC() {
		return &oidc.Verifier{Issuer: p.Issuer, ClientID: p.ClientID}
	}
	return &oidc.PinnedVerifier{Issuer: p.Issuer, Audience: p.Audience, JWKSURI: p.JWKSURI}
}

// referencePin is the pin the reference derives from an IdP base URL.
func referencePin(idp string) (Pin, error) {
	u, err := oidc.NormalizeIdPURL(idp)
	if err != nil {
		return Pin{}, err
	}
	o := oidc.Origin(u)
	return Pin{Version: pinVersion, URL: u, Issuer: o, Audience: o, JWKSURI: u + "/jwks"}, nil
}

// check validates a pin read from disk or about to be written.
func (p Pin) check() error {
	if p.Version != pinVersion {
		return fmt.Errorf("version %d: want %d", p.Version, pinVersion)
	}
	if p.OIDC() {
		if err := protocol.CheckSpace(p.Space); err != nil {
			return err
		}
		return oidc.CheckIssuer(p.Issuer)
	}
	if p.URL == "" || p.Issuer == "" || p.Audience == "" || p.JWKSURI == "" {
		return errors.New("malformed IdP pin (want url, issuer, audience and jwksUri, or issuer and clientId) - re-pin with `cotal up --user-auth --idp <url>`")
	}
	return oidc.CheckJWKSURL(p.JWKSURI)
}

// ReadPin reads the pin of space from the trust folder chainDir. A space without one gets
// an error wrapping ErrNotUserAuth; a pin that does not decode is an error naming the file.
func ReadPin(chainDir, space string) (Pin, error) {
	path := filepath.Join(StateDir(chainDir, space), PinFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Pin{}, fmt.Errorf("space %q: %w (no %s; `cotal up --user-auth --idp <IdP URL> --space %s` makes it one)", space, ErrNotUserAuth, path, space)
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
	if p.Space != "" && p.Space != space {
		return Pin{}, fmt.Errorf("%s: pins space %q, not %q", path, p.Space, space)
	}
	return p, nil
}

// describe names the pinned IdP for a refusal.
func (p Pin) describe() string {
	if p.OIDC() {
		return fmt.Sprintf("the OIDC IdP %s (client %s)", p.Issuer, p.ClientID)
	}
	return "the IdP " + p.URL
}

// samePin reports whether got, the pin on disk, pins the IdP want asks for. An OIDC pin
// matches a request without a client id for its own issuer: the space keeps its pin.
func samePin(got, want Pin) bool {
	switch {
	case got.OIDC() && want.OIDC():
		return got.Issuer == want.Issuer && got.ClientID == want.ClientID
	case got.OIDC():
		n, err := oidc.NormalizeIdPURL(got.Issuer)
		return err == nil && n == want.URL
	case want.OIDC():
		return false
	}
	n, err := oidc.NormalizeIdPURL(got.URL)
	return err == nil && n == want.URL
}

// Enable makes space a user-auth space trusting the IdP at idp: it writes the pin
// (create-only), then creates what the auth service needs and does not yet exist: the
// callout account AUTH_<space> with its sentinel and xkey, the bearer issuer key and the
// owner secret. With clientID empty the pin is the reference's (idp is the IdP's base URL;
// see Pin), else Go's OIDC form (idp is the issuer URL, clientID the audience). Enabling
// again with the same IdP changes nothing, and so does naming the issuer of an OIDC pin
// without a client id (a space pinned by an older release, whose default client id was
// "cotal"); naming another IdP is refused, since it would re-key every owner.
func Enable(chain *trust.Chain, space, idp, clientID string) (Pin, error) {
	want := Pin{Version: pinVersion, Space: space, Issuer: idp, ClientID: clientID}
	if clientID == "" {
		p, err := referencePin(idp)
		if err != nil {
			return Pin{}, fmt.Errorf("user auth for %q: %w", space, err)
		}
		want = p
	}
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
	err = atomicfile.CreateFile(filepath.Join(dir, PinFile), b, 0o600)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return Pin{}, fmt.Errorf("user auth for %q: %w", space, err)
	}
	got, err := ReadPin(chain.Dir(), space)
	if err != nil {
		return Pin{}, err
	}
	if !samePin(got, want) {
		return Pin{}, fmt.Errorf("space %q already trusts %s; re-pointing it to %s would re-key every owner",
			space, got.describe(), want.describe())
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
