package exchangewire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/redact"
	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// Discovery-bundle constants.
const (
	BundlePath     = "/.well-known/cotal-mesh" // where the public face serves the bundle
	BundleProvider = "cotal"                   // the only userAuth.provider
	MaxBundle      = 64 << 10                  // largest bundle FetchBundle reads, bytes
	fetchTimeout   = 10 * time.Second          // bound on FetchBundle when ctx has none sooner
)

// Bundle is the discovery bundle a public face serves at BundlePath: everything a client
// needs to join the space's mesh. Clients register it with `cotal meshes add --from <url>`.
type Bundle struct {
	Space       string   `json:"space"`       // the space (protocol.CheckSpace)
	Server      string   `json:"server"`      // the broker URL: nats:, tls:, ws: or wss:
	TLSRequired bool     `json:"tlsRequired"` // clients must use TLS; always true for tls: and wss:
	UserAuth    UserAuth `json:"userAuth"`
	// SentinelCreds is the creds file text of the deny-all sentinel user every client
	// connects as, carrying its Cotal bearer in the connect's auth_token.
	SentinelCreds string `json:"sentinelCreds"`
	// Policy is the reference's optional closed policy object; the only one it defines is
	// {"events":"required"}. Go checks it and serves none.
	Policy *BundlePolicy `json:"policy,omitempty"`
}

// BundlePolicy is the reference's closed bundle policy: {"events":"required"} only.
type BundlePolicy struct {
	Events string `json:"events"`
}

// UserAuth is how a client gets a Cotal bearer for the space.
type UserAuth struct {
	Provider  string    `json:"provider"` // always BundleProvider
	IdP       BundleIdP `json:"idp"`
	Endpoints Endpoints `json:"endpoints"`
}

// BundleIdP is the space's pinned IdP: where humans log in and what their ID tokens carry.
type BundleIdP struct {
	URL      string `json:"url"`      // the IdP base URL: https, or http on a loopback IP
	Issuer   string `json:"issuer"`   // the ID tokens' iss
	Audience string `json:"audience"` // the ID tokens' aud
}

// Endpoints are the public face's URLs, as the reference's service.ts
// finalizeUserBundleEndpoint writes them. Clients derive POST /exchange by appending
// "/exchange" to URL.
type Endpoints struct {
	URL string `json:"url"` // the public face's base URL, no query or fragment
	// ManagerAuthorityURL is URL + "/manager-service-authority", the reference's route for
	// remote manager services, read from a reference's bundle; cotal's exchange does not
	// serve it (it answers 501) and so never advertises it.
	ManagerAuthorityURL string `json:"managerAuthorityUrl,omitempty"`
	// AgentProvisioningURL is where a remote `cotal spawn` posts its login bearer to mint a
	// managed agent; empty when the space offers none.
	AgentProvisioningURL string `json:"agentProvisioningUrl,omitempty"`
	// JWKSURL is URL + "/jwks", the bearer issuer's public keys: a Go extra, absent from
	// the reference's bundles (where it is the same URL).
	JWKSURL string `json:"jwksUrl,omitempty"`
}

// JWKS is where the bearer issuer's public keys are: JWKSURL, or URL + "/jwks".
func (e Endpoints) JWKS() string {
	if e.JWKSURL != "" {
		return e.JWKSURL
	}
	return strings.TrimSuffix(e.URL, "/") + "/jwks"
}

// Validate checks every field: a valid space, a broker URL, tlsRequired true for a tls: or
// wss: server, provider "cotal", a complete IdP, endpoint URLs that are https (http only on
// a loopback IP), and sentinel creds that parse as a user JWT and seed.
func (b *Bundle) Validate() error {
	if err := protocol.CheckSpace(b.Space); err != nil {
		return fmt.Errorf("space: %w", err)
	}
	if err := CheckServer(b.Server, b.TLSRequired); err != nil {
		return err
	}
	ua := b.UserAuth
	if ua.Provider != BundleProvider {
		return fmt.Errorf("userAuth.provider %q: want %q", ua.Provider, BundleProvider)
	}
	if err := checkEndpointURL(ua.IdP.URL, true); err != nil {
		return fmt.Errorf("userAuth.idp.url: %w", err)
	}
	if ua.IdP.Issuer == "" || ua.IdP.Audience == "" {
		return errors.New("userAuth.idp: issuer and audience are required")
	}
	if err := checkEndpointURL(ua.Endpoints.URL, true); err != nil {
		return fmt.Errorf("userAuth.endpoints.url: %w", err)
	}
	if j := ua.Endpoints.JWKSURL; j != "" {
		if err := checkEndpointURL(j, false); err != nil {
			return fmt.Errorf("userAuth.endpoints.jwksUrl: %w", err)
		}
	}
	if m := ua.Endpoints.ManagerAuthorityURL; m != "" {
		if err := checkEndpointURL(m, false); err != nil {
			return fmt.Errorf("userAuth.endpoints.managerAuthorityUrl: %w", err)
		}
	}
	if p := ua.Endpoints.AgentProvisioningURL; p != "" {
		if err := CheckHTTPS(p, false); err != nil {
			return fmt.Errorf("userAuth.endpoints.agentProvisioningUrl: %w", err)
		}
	}
	if _, err := trust.ReadCreds([]byte(b.SentinelCreds)); err != nil {
		return fmt.Errorf("sentinelCreds: %w", err)
	}
	if b.Policy != nil && b.Policy.Events != "required" {
		return fmt.Errorf(`policy {"events":%q}: the only policy is {"events":"required"}`, b.Policy.Events)
	}
	return nil
}

// DecodeBundle parses one bundle as the reference's consumer (checkUserBundle) does:
// a single JSON object whose unknown fields are ignored, so a bundle of another
// implementation or a newer release is read, with tlsRequired present and Validate passing.
func DecodeBundle(data []byte) (Bundle, error) {
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return Bundle{}, fmt.Errorf("decode bundle: %w", err)
	}
	var present struct {
		TLSRequired *bool           `json:"tlsRequired"`
		Policy      json.RawMessage `json:"policy"`
	}
	if err := json.Unmarshal(data, &present); err != nil || present.TLSRequired == nil {
		return Bundle{}, errors.New("decode bundle: tlsRequired is required")
	}
	if len(present.Policy) > 0 { // closed, as in the reference
		if err := strictjson.Decode(present.Policy, &BundlePolicy{}); err != nil {
			return Bundle{}, fmt.Errorf(`decode bundle: policy %s: the only policy is {"events":"required"}`, present.Policy)
		}
	}
	if err := b.Validate(); err != nil {
		return Bundle{}, fmt.Errorf("decode bundle: %w", err)
	}
	return b, nil
}

// BundleURL is where a public face whose base URL is base serves its bundle: base with query
// and fragment stripped, a trailing slash dropped, and BundlePath appended. It refuses a base
// that is not https (http only on a loopback IP).
func BundleURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("bundle URL %q is not a URL: %w", redact.URL(base), redact.ParseError(err))
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if err := checkEndpointURL(u.String(), true); err != nil {
		return "", fmt.Errorf("bundle URL: %w", err)
	}
	return u.String() + BundlePath, nil
}

// FetchBundle GETs the discovery bundle of the public face at baseURL (see BundleURL) and
// decodes it with DecodeBundle. It follows no redirects, reads at most MaxBundle bytes and
// gives up after 10 s if ctx has no earlier deadline.
func FetchBundle(ctx context.Context, baseURL string) (Bundle, error) {
	target, err := BundleURL(baseURL)
	if err != nil {
		return Bundle{}, fmt.Errorf("fetch bundle: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return Bundle{}, fmt.Errorf("fetch bundle %s: %w", target, err)
	}
	req.Header.Set("Accept", "application/json")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		return Bundle{}, fmt.Errorf("fetch bundle %s: %w", target, redact.RequestError(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return Bundle{}, fmt.Errorf("fetch bundle %s: status %s (redirects are not followed)", target, res.Status)
	}
	if mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return Bundle{}, fmt.Errorf("fetch bundle %s: content type %q, want application/json", target, res.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxBundle+1))
	if err != nil {
		return Bundle{}, fmt.Errorf("fetch bundle %s: read: %w", target, err)
	}
	if len(body) > MaxBundle {
		return Bundle{}, fmt.Errorf("fetch bundle %s: larger than %d bytes", target, MaxBundle)
	}
	b, err := DecodeBundle(body)
	if err != nil {
		return Bundle{}, fmt.Errorf("fetch bundle %s: %w", target, err)
	}
	return b, nil
}
