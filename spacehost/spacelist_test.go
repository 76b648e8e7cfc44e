package spacehost

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/strictjson"
)

// portSettings is a version 2 settings parser for the tests: space and one port.
func portSettings(raw json.RawMessage) (any, error) {
	var s struct {
		Space              string `json:"space"`
		ExchangePublicPort int    `json:"exchangePublicPort"`
	}
	if err := strictjson.Decode(raw, &s); err != nil {
		return nil, err
	}
	if s.ExchangePublicPort < 0 || s.ExchangePublicPort > 65535 {
		return nil, errors.New("exchangePublicPort: want 0 to 65535")
	}
	return s.ExchangePublicPort, nil
}

var manifests = []struct {
	name     string
	in       string
	settings bool
	spaces   []string
	err      string // substring of the refusal; "" means it parses
}{
	{"v1", `{"version": 1, "spaces": ["alpha", "beta"]}`, false, []string{"alpha", "beta"}, ""},
	{"v1 empty", `{"version": 1, "spaces": []}`, false, []string{}, ""},
	{"v2 plain", `{"version": 2, "spaces": [{"space": "alpha"}]}`, false, []string{"alpha"}, ""},
	{"v2 settings", `{"version": 2, "spaces": [{"space": "alpha", "exchangePublicPort": 7451}, {"space": "b-2"}]}`, true, []string{"alpha", "b-2"}, ""},
	{"v2 field without parser", `{"version": 2, "spaces": [{"space": "alpha", "exchangePublicPort": 7451}]}`, false, nil, `entry 0: space "alpha": json: unknown field "exchangePublicPort"`},
	{"v2 unknown field", `{"version": 2, "spaces": [{"space": "alpha", "bogus": 1}]}`, true, nil, `entry 0: space "alpha": json: unknown field "bogus"`},
	{"v2 bad setting", `{"version": 2, "spaces": [{"space": "a"}, {"space": "b", "exchangePublicPort": 70000}]}`, true, nil, `entry 1: space "b": exchangePublicPort`},
	{"v2 no space", `{"version": 2, "spaces": [{"exchangePublicPort": 1}]}`, true, nil, "entry 0: no space"},
	{"v2 not object", `{"version": 2, "spaces": ["alpha"]}`, true, nil, "entry 0: want an object"},
	{"v2 space not string", `{"version": 2, "spaces": [{"space": 3}]}`, true, nil, "entry 0: space: want a string"},
	{"duplicate", `{"version": 1, "spaces": ["alpha", "beta", "alpha"]}`, false, nil, `entry 2: space "alpha" is named twice (entry 0 too)`},
	{"v2 duplicate", `{"version": 2, "spaces": [{"space": "a"}, {"space": "a"}]}`, false, nil, `entry 1: space "a" is named twice`},
	{"invalid name", `{"version": 1, "spaces": ["alpha", "a.b"]}`, false, nil, `entry 1: `},
	{"empty name", `{"version": 1, "spaces": [""]}`, false, nil, `entry 0: `},
	{"dotdot", `{"version": 2, "spaces": [{"space": ".."}]}`, false, nil, `entry 0: `},
	{"unknown top field", `{"version": 1, "spaces": [], "extra": true}`, false, nil, `unknown field "extra"`},
	{"no version", `{"spaces": ["a"]}`, false, nil, "no version"},
	{"bad version", `{"version": 3, "spaces": ["a"]}`, false, nil, "version 3: want 1 or 2"},
	{"no spaces", `{"version": 1}`, false, nil, "no spaces list"},
	{"null spaces", `{"version": 1, "spaces": null}`, false, nil, "no spaces list"},
	{"v1 objects", `{"version": 1, "spaces": [{"space": "a"}]}`, false, nil, "want a list of space names"},
	{"trailing", `{"version": 1, "spaces": ["a"]} {}`, false, nil, "trailing data"},
	{"truncated", `{"version": 1, "spaces": ["a"`, false, nil, "space manifest: the JSON ends early"},
	{"not json", `version: 1`, false, nil, "space manifest"},
	{"empty", ``, false, nil, "space manifest: the JSON ends early"},
	{"array", `[1,2,3]`, false, nil, `space manifest: want an object such as {"version": 1, "spaces": ["alpha", "beta"]}, not a JSON array`},
	{"version string", `{"version": "1", "spaces": ["a"]}`, false, nil, `"version" is a JSON string`},
	{"v1 numbers", `{"version": 1, "spaces": [1]}`, false, nil, `spaces: want a list of space names, such as ["alpha", "beta"], not a JSON number`},
	{"v2 not list", `{"version": 2, "spaces": {"space": "a"}}`, false, nil, `spaces: want a list of objects, such as [{"space": "alpha"}], not a JSON object`},
}

// TestManifestErrorsNameNoGoType: no refusal names a Go type; each says what shape it wants.
func TestManifestErrorsNameNoGoType(t *testing.T) {
	for _, c := range manifests {
		if _, err := ParseSpaceList([]byte(c.in), nil); err != nil && strings.Contains(err.Error(), "Go ") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestParseSpaceList(t *testing.T) {
	for _, c := range manifests {
		t.Run(c.name, func(t *testing.T) {
			var settings func(json.RawMessage) (any, error)
			if c.settings {
				settings = portSettings
			}
			m, err := ParseSpaceList([]byte(c.in), settings)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got := m.Names(); !slices.Equal(got, c.spaces) {
				t.Fatalf("spaces %q, want %q", got, c.spaces)
			}
		})
	}
}

func TestParseSpaceListSettings(t *testing.T) {
	m, err := ParseSpaceList([]byte(`{"version":2,"spaces":[{"space":"a", "exchangePublicPort": 7451}]}`), portSettings)
	if err != nil {
		t.Fatal(err)
	}
	if m.Spaces[0].Settings != 7451 || string(m.Spaces[0].Raw) != `{"space":"a","exchangePublicPort":7451}` {
		t.Fatalf("entry %+v", m.Spaces[0])
	}
}

func FuzzParseSpaceList(f *testing.F) {
	for _, c := range manifests {
		f.Add(c.in, c.settings)
	}
	f.Fuzz(func(t *testing.T, in string, withSettings bool) {
		var settings func(json.RawMessage) (any, error)
		if withSettings {
			settings = portSettings
		}
		m, err := ParseSpaceList([]byte(in), settings)
		if err != nil {
			return
		}
		if m.Version != 1 && m.Version != 2 {
			t.Fatalf("%q parsed with version %d", in, m.Version)
		}
		seen := map[string]bool{}
		for _, e := range m.Spaces {
			if seen[e.Space] {
				t.Fatalf("%q parsed with %q twice", in, e.Space)
			}
			seen[e.Space] = true
		}
		// A parsed manifest rebuilt as version 1 parses to the same spaces.
		b, _ := json.Marshal(map[string]any{"version": 1, "spaces": m.Names()})
		m2, err := ParseSpaceList(b, nil)
		if err != nil || !slices.Equal(m2.Names(), m.Names()) {
			t.Fatalf("%q: rebuilt %s: %v", in, b, err)
		}
	})
}

// onePort is entry settings naming one port.
type onePort int

func (p onePort) Ports() []int { return []int{int(p)} }

// TestManifestPortsUnique: two version 2 entries naming one port refuse the manifest,
// naming both entries.
func TestManifestPortsUnique(t *testing.T) {
	parse := func(raw json.RawMessage) (any, error) {
		var e struct {
			Space string `json:"space"`
			Port  int    `json:"port"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, err
		}
		return onePort(e.Port), nil
	}
	_, err := ParseSpaceList([]byte(`{"version":2,"spaces":[{"space":"a","port":7451},{"space":"b","port":7452},{"space":"c","port":7451}]}`), parse)
	if err == nil || !strings.Contains(err.Error(), "entry 2") || !strings.Contains(err.Error(), `entry 0 (space "a")`) || !strings.Contains(err.Error(), "7451") {
		t.Fatalf("duplicate port: %v", err)
	}
	if _, err := ParseSpaceList([]byte(`{"version":2,"spaces":[{"space":"a","port":7451},{"space":"b","port":7452}]}`), parse); err != nil {
		t.Fatal(err)
	}
}
