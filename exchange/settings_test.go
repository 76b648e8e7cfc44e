package exchange

import (
	"errors"
	"strings"
	"testing"
)

func TestPublicFaceCheck(t *testing.T) {
	cases := []struct {
		name    string
		p       PublicFace
		setting Setting // empty: accepted
		msg     string  // a substring of the refusal
	}{
		{"zero: no public face", PublicFace{}, "", ""},
		{"port only", PublicFace{Port: 7451}, "", ""},
		{"port max", PublicFace{Port: 65535}, "", ""},
		{"everything", PublicFace{Port: 7451, URL: "https://mesh.example.com/cotal", TrustedProxy: true,
			AdvertisedServer: "tls://nats.example.com:4222", AgentProvisioningURL: "https://mesh.example.com/provision?x=1"}, "", ""},
		{"every broker scheme nats", PublicFace{Port: 1, AdvertisedServer: "nats://n.example:4222"}, "", ""},
		{"every broker scheme ws", PublicFace{Port: 1, AdvertisedServer: "ws://n.example/ws"}, "", ""},
		{"every broker scheme wss", PublicFace{Port: 1, AdvertisedServer: "wss://n.example"}, "", ""},

		{"negative port", PublicFace{Port: -1}, SettingPort, "out of range"},
		{"port too big", PublicFace{Port: 65536}, SettingPort, "out of range"},

		{"url without port", PublicFace{URL: "https://mesh.example.com"}, SettingURL, "requires --exchange-public-port"},
		{"trusted proxy without port", PublicFace{TrustedProxy: true}, SettingTrustedProxy, "requires --exchange-public-port"},
		{"advertised without port", PublicFace{AdvertisedServer: "tls://n.example:4222"}, SettingAdvertisedServer, "requires --exchange-public-port"},
		{"provisioning without port", PublicFace{AgentProvisioningURL: "https://p.example"}, SettingProvisioningURL, "requires --exchange-public-port"},

		{"url http", PublicFace{Port: 1, URL: "http://mesh.example.com"}, SettingURL, "https://"},
		{"url relative", PublicFace{Port: 1, URL: "/cotal"}, SettingURL, "https://"},
		{"url no host", PublicFace{Port: 1, URL: "https:///cotal"}, SettingURL, "no host"},
		{"url opaque", PublicFace{Port: 1, URL: "https:mesh.example.com"}, SettingURL, "no host"},
		{"url userinfo", PublicFace{Port: 1, URL: "https://u:p@mesh.example.com"}, SettingURL, "user"},
		{"url query", PublicFace{Port: 1, URL: "https://mesh.example.com/?a=b"}, SettingURL, "query"},
		{"url fragment", PublicFace{Port: 1, URL: "https://mesh.example.com/#x"}, SettingURL, "fragment"},
		{"url unparsable", PublicFace{Port: 1, URL: "https://mesh.example.com/%zz"}, SettingURL, "not a URL"},

		{"advertised https", PublicFace{Port: 1, AdvertisedServer: "https://n.example"}, SettingAdvertisedServer, "nats://"},
		{"advertised bare host", PublicFace{Port: 1, AdvertisedServer: "n.example:4222"}, SettingAdvertisedServer, "nats://"},
		{"advertised no host", PublicFace{Port: 1, AdvertisedServer: "nats://"}, SettingAdvertisedServer, "no host"},
		{"advertised opaque", PublicFace{Port: 1, AdvertisedServer: "nats:n.example"}, SettingAdvertisedServer, "no host"},
		{"advertised userinfo", PublicFace{Port: 1, AdvertisedServer: "nats://u:p@n.example"}, SettingAdvertisedServer, "user"},

		{"provisioning http", PublicFace{Port: 1, AgentProvisioningURL: "http://p.example"}, SettingProvisioningURL, "https://"},
		{"provisioning no host", PublicFace{Port: 1, AgentProvisioningURL: "https://"}, SettingProvisioningURL, "no host"},
		{"provisioning userinfo", PublicFace{Port: 1, AgentProvisioningURL: "https://u@p.example"}, SettingProvisioningURL, "user"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Check()
			if c.setting == "" {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			se, ok := errors.AsType[*SettingError](err)
			if !ok {
				t.Fatalf("Check: %v, want a *SettingError", err)
			}
			if se.Setting != c.setting || !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), string(c.setting)+": ") {
				t.Fatalf("Check: %v (setting %q), want setting %q and %q", err, se.Setting, c.setting, c.msg)
			}
		})
	}
}

func TestSettingNames(t *testing.T) {
	cases := []struct {
		s          Setting
		flag, json string
	}{
		{SettingPort, "--exchange-public-port", "exchangePublicPort"},
		{SettingURL, "--exchange-public-url", "exchangePublicUrl"},
		{SettingTrustedProxy, "--exchange-trusted-proxy", "exchangeTrustedProxy"},
		{SettingAdvertisedServer, "--advertised-server", "advertisedServer"},
		{SettingProvisioningURL, "--agent-provisioning-url", "agentProvisioningUrl"},
		{Setting("nope"), "--nope", ""},
	}
	for _, c := range cases {
		if c.s.Flag() != c.flag || c.s.ManifestKey() != c.json {
			t.Errorf("%q: flag %q key %q, want %q %q", c.s, c.s.Flag(), c.s.ManifestKey(), c.flag, c.json)
		}
	}
	// The parse error stays reachable.
	err := PublicFace{Port: 1, URL: "https://x/%zz"}.Check()
	if se, ok := errors.AsType[*SettingError](err); !ok || se.Unwrap() == nil {
		t.Fatalf("unparsable URL: %v carries no cause", err)
	}
}
