package exchange

import (
	"errors"
	"fmt"

	"github.com/cotal-ai/cotal/exchangewire"
)

// Setting names one public-face setting in its flag form (without the leading "--"). The
// CLI reports a setting as Flag, a manifest entry as ManifestKey.
type Setting string

// The public-face settings.
const (
	SettingPort             Setting = "exchange-public-port"
	SettingURL              Setting = "exchange-public-url"
	SettingTrustedProxy     Setting = "exchange-trusted-proxy"
	SettingAdvertisedServer Setting = "advertised-server"
	SettingProvisioningURL  Setting = "agent-provisioning-url"
)

// Flag is the setting as a command-line flag, for example "--exchange-public-url".
func (s Setting) Flag() string { return "--" + string(s) }

// ManifestKey is the setting's key in a space-host manifest entry, for example
// "exchangePublicUrl"; empty for a string that is not one of the Setting constants.
func (s Setting) ManifestKey() string {
	switch s {
	case SettingPort:
		return "exchangePublicPort"
	case SettingURL:
		return "exchangePublicUrl"
	case SettingTrustedProxy:
		return "exchangeTrustedProxy"
	case SettingAdvertisedServer:
		return "advertisedServer"
	case SettingProvisioningURL:
		return "agentProvisioningUrl"
	}
	return ""
}

// SettingError is a public-face setting refused by PublicFace.Check. Setting names it, so
// the CLI can say Setting.Flag() and a manifest Setting.ManifestKey(); Err is the parse
// error behind it, if any.
type SettingError struct {
	Setting Setting
	Msg     string // what is wrong, without the setting's name
	Err     error  // the underlying cause; may be nil
}

// Error reads "<setting>: <msg>".
func (e *SettingError) Error() string { return string(e.Setting) + ": " + e.Msg }

// Unwrap returns the underlying cause.
func (e *SettingError) Unwrap() error { return e.Err }

// PublicFace holds the settings of a space's public exchange face, shared by the
// auth-service flags and the space-host manifest entries. The zero value means no public face.
type PublicFace struct {
	// Port is the public listener's port on 127.0.0.1, 1..65535; 0 means no public face (and,
	// for Server.Public, an ephemeral port). A reverse proxy terminates TLS in front of it.
	Port int
	// URL is the https:// URL clients reach the face at (the proxy's); empty means
	// http://127.0.0.1:<bound port>. No userinfo, query or fragment.
	URL string
	// TrustedProxy keys the refusal throttle on the last X-Forwarded-For hop instead of the
	// socket address; set it only when the proxy appends that header.
	TrustedProxy bool
	// AdvertisedServer is the broker URL the discovery bundle gives clients (nats:, tls:, ws:
	// or wss:); empty means the auth service's own server URL.
	AdvertisedServer string
	// AgentProvisioningURL is the https:// URL where a remote `cotal spawn` posts its login
	// bearer to mint a managed agent; empty means the bundle names none.
	AgentProvisioningURL string
}

// Check applies the setting rules: Port lies in 0..65535; URL, TrustedProxy,
// AdvertisedServer and AgentProvisioningURL each require Port > 0; URL and
// AgentProvisioningURL are absolute https:// URLs with a host and no userinfo (URL also
// without query or fragment); AdvertisedServer is a nats:, tls:, ws: or wss: URL with a host
// and no userinfo. A refusal is a *SettingError naming the first offending setting.
func (p PublicFace) Check() error {
	if err := p.checkValues(); err != nil {
		return err
	}
	if p.Port > 0 {
		return nil
	}
	for _, c := range []struct {
		set bool
		s   Setting
	}{
		{p.URL != "", SettingURL},
		{p.TrustedProxy, SettingTrustedProxy},
		{p.AdvertisedServer != "", SettingAdvertisedServer},
		{p.AgentProvisioningURL != "", SettingProvisioningURL},
	} {
		if c.set {
			return &SettingError{Setting: c.s, Msg: "requires " + SettingPort.Flag() + " (a public face)"}
		}
	}
	return nil
}

// checkValues applies every rule but the port requirement: a Server serving a public face
// with Port 0 binds an ephemeral port.
func (p PublicFace) checkValues() error {
	if p.Port < 0 || p.Port > 65535 {
		return &SettingError{Setting: SettingPort, Msg: fmt.Sprintf("port %d is out of range 0..65535", p.Port)}
	}
	if p.URL != "" {
		if err := exchangewire.CheckHTTPS(p.URL, true); err != nil {
			return settingError(SettingURL, err)
		}
	}
	if p.AdvertisedServer != "" {
		if err := exchangewire.CheckBrokerURL(p.AdvertisedServer); err != nil {
			return settingError(SettingAdvertisedServer, err)
		}
	}
	if p.AgentProvisioningURL != "" {
		if err := exchangewire.CheckHTTPS(p.AgentProvisioningURL, false); err != nil {
			return settingError(SettingProvisioningURL, err)
		}
	}
	return nil
}

// settingError names setting s in a URL rule's refusal (an *exchangewire.URLError).
func settingError(s Setting, err error) *SettingError {
	if ue, ok := errors.AsType[*exchangewire.URLError](err); ok {
		return &SettingError{Setting: s, Msg: ue.Msg, Err: ue.Err}
	}
	return &SettingError{Setting: s, Msg: err.Error()}
}
