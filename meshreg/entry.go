package meshreg

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// Entry is one registered remote mesh: what a client needs to sign in and connect.
type Entry struct {
	Space       string `json:"space"`       // the space (protocol.CheckSpace)
	Server      string `json:"server"`      // broker URL: nats:, tls:, ws: or wss:
	TLSRequired bool   `json:"tlsRequired"` // clients must use TLS; true for tls: and wss:
	// TLSCA is the CA file (PEM) the broker's TLS certificate is checked against
	// (cotal meshes add --tls-ca); "" means the system's roots.
	TLSCA       string `json:"tlsCA,omitempty"`
	IdPIssuer   string `json:"idpIssuer"`   // the pinned IdP's issuer: cotal login --idp
	IdPClientID string `json:"idpClientId"` // the audience of its ID tokens: cotal login --client-id
	// IdPURL is the bundle's idp.url when it differs from the issuer: the base URL of an
	// IdP pinned the reference's way, where people sign in (cotal login --idp).
	IdPURL string `json:"idpUrl,omitempty"`
	// ExchangeURL is the pinned public base URL the entry was added from (query, fragment
	// and trailing slash dropped); POST /exchange is ExchangeURL + "/exchange".
	ExchangeURL string `json:"exchangeUrl"`
	JWKSURL     string `json:"jwksUrl"` // the bearer issuer's public keys
	// ManagerAuthorityURL is the reference's manager-service authority route of the
	// bundle, kept as the bundle gave it; empty when the bundle had none.
	ManagerAuthorityURL string `json:"managerAuthorityUrl,omitempty"`
	// AgentProvisioningURL is where a remote spawn mints managed agents; empty for none.
	AgentProvisioningURL string `json:"agentProvisioningUrl,omitempty"`
	// SentinelCreds is the creds file text of the space's deny-all sentinel user.
	SentinelCreds string    `json:"sentinelCreds"`
	AddedAt       time.Time `json:"addedAt"` // when the entry was first recorded
}

// BaseURL returns the canonical form of a public face's base URL, the form Entry pins:
// query, fragment and trailing slash dropped. Like exchangewire.BundleURL it refuses a URL that
// is not https (http only on a loopback IP).
func BaseURL(raw string) (string, error) {
	u, err := exchangewire.BundleURL(raw)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(u, exchangewire.BundlePath), nil
}

// idpURL is the IdP base URL an entry keeps: empty when it is the issuer.
func idpURL(idp exchangewire.BundleIdP) string {
	if idp.URL == idp.Issuer {
		return ""
	}
	return idp.URL
}

// ReferenceIdP reports whether the mesh's IdP is pinned the reference's way (audience =
// issuer, the IdP's origin; no client id), so people sign in with the reference's login.
func (e *Entry) ReferenceIdP() bool { return e.IdPClientID == e.IdPIssuer }

// LoginURL is what cotal login --idp takes for the mesh's IdP.
func (e *Entry) LoginURL() string {
	if e.IdPURL != "" {
		return e.IdPURL
	}
	return e.IdPIssuer
}

// FromBundle builds the entry of a bundle fetched from the public base URL base at time now.
func FromBundle(b exchangewire.Bundle, base string, now time.Time) (Entry, error) {
	pinned, err := BaseURL(base)
	if err != nil {
		return Entry{}, err
	}
	return Entry{
		Space: b.Space, Server: b.Server, TLSRequired: b.TLSRequired,
		IdPIssuer: b.UserAuth.IdP.Issuer, IdPClientID: b.UserAuth.IdP.Audience, IdPURL: idpURL(b.UserAuth.IdP),
		ExchangeURL: pinned, JWKSURL: b.UserAuth.Endpoints.JWKS(),
		ManagerAuthorityURL:  b.UserAuth.Endpoints.ManagerAuthorityURL,
		AgentProvisioningURL: b.UserAuth.Endpoints.AgentProvisioningURL,
		SentinelCreds:        b.SentinelCreds, AddedAt: now.UTC().Truncate(time.Second),
	}, nil
}

// Validate checks every field: a valid space, a broker URL (tlsRequired for tls: and
// wss:), an IdP issuer and client id, a canonical pinned base URL, https endpoint URLs
// (http only on a loopback IP), sentinel creds holding a user JWT and seed, and AddedAt.
func (e *Entry) Validate() error {
	if err := protocol.CheckSpace(e.Space); err != nil {
		return fmt.Errorf("space: %w", err)
	}
	if err := exchangewire.CheckServer(e.Server, e.TLSRequired); err != nil {
		return err
	}
	if e.IdPIssuer == "" || e.IdPClientID == "" {
		return errors.New("idpIssuer and idpClientId are required")
	}
	if e.IdPURL != "" {
		if _, err := exchangewire.BundleURL(e.IdPURL); err != nil {
			return fmt.Errorf("idpUrl: %w", err)
		}
	}
	if base, err := BaseURL(e.ExchangeURL); err != nil {
		return fmt.Errorf("exchangeUrl: %w", err)
	} else if base != e.ExchangeURL {
		return fmt.Errorf("exchangeUrl %q: not canonical (want %q)", e.ExchangeURL, base)
	}
	if _, err := exchangewire.BundleURL(e.JWKSURL); err != nil {
		return fmt.Errorf("jwksUrl: %w", err)
	}
	if m := e.ManagerAuthorityURL; m != "" {
		if _, err := exchangewire.BundleURL(m); err != nil {
			return fmt.Errorf("managerAuthorityUrl: %w", err)
		}
	}
	if p := e.AgentProvisioningURL; p != "" {
		if u, err := url.Parse(p); err != nil || u.Scheme != "https" || u.Hostname() == "" || u.User != nil {
			return fmt.Errorf("agentProvisioningUrl %q: want an https URL with a host", p)
		}
	}
	if _, err := trust.ReadCreds([]byte(e.SentinelCreds)); err != nil {
		return fmt.Errorf("sentinelCreds: %w", err)
	}
	if e.AddedAt.IsZero() {
		return errors.New("addedAt is required")
	}
	return nil
}

// Encode returns the entry's file text: indented JSON and a newline.
func (e *Entry) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode mesh entry: %w", err)
	}
	return append(b, '\n'), nil
}

// Decode parses one entry strictly: a single JSON object, no unknown fields, every
// required field present, and Validate passing.
func Decode(data []byte) (Entry, error) {
	var e Entry
	if err := strictjson.Decode(data, &e); err != nil {
		return Entry{}, fmt.Errorf("decode mesh entry: %w", err)
	}
	var present struct {
		TLSRequired *bool `json:"tlsRequired"`
	}
	if err := json.Unmarshal(data, &present); err != nil || present.TLSRequired == nil {
		return Entry{}, errors.New("decode mesh entry: tlsRequired is required")
	}
	if err := e.Validate(); err != nil {
		return Entry{}, fmt.Errorf("decode mesh entry: %w", err)
	}
	return e, nil
}

// diff names the fields, other than AddedAt, in which e and o differ.
func (e Entry) diff(o Entry) []string {
	var out []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"server", e.Server == o.Server},
		{"tlsRequired", e.TLSRequired == o.TLSRequired},
		{"tlsCA", e.TLSCA == o.TLSCA},
		{"idpIssuer", e.IdPIssuer == o.IdPIssuer},
		{"idpClientId", e.IdPClientID == o.IdPClientID},
		{"idpUrl", e.IdPURL == o.IdPURL},
		{"exchangeUrl", e.ExchangeURL == o.ExchangeURL},
		{"jwksUrl", e.JWKSURL == o.JWKSURL},
		{"managerAuthorityUrl", e.ManagerAuthorityURL == o.ManagerAuthorityURL},
		{"agentProvisioningUrl", e.AgentProvisioningURL == o.AgentProvisioningURL},
		{"sentinelCreds", e.SentinelCreds == o.SentinelCreds},
	} {
		if !f.same {
			out = append(out, f.name)
		}
	}
	return out
}
