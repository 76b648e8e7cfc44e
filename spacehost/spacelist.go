package spacehost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/protocol"
)

// SpaceList is a parsed space manifest (the JSON file a host is given): the spaces it serves,
// in manifest order. It is not a project manifest (cotal.yaml, workspace.Manifest).
type SpaceList struct {
	Version int     // 1 or 2
	Spaces  []Entry // one per space, no space twice
}

// Entry is one space of a manifest.
type Entry struct {
	Space string
	// Raw is the entry's JSON, compacted, for a version 2 manifest (nil for version 1): two
	// entries of one space with different Raw are a changed entry.
	Raw json.RawMessage
	// Settings is what the settings parser returned for a version 2 entry (nil without one).
	Settings any
}

// Names returns the manifest's spaces in order.
func (m *SpaceList) Names() []string {
	out := make([]string, len(m.Spaces))
	for i, e := range m.Spaces {
		out[i] = e.Space
	}
	return out
}

// entry returns the entry of space, or false.
func (m *SpaceList) entry(space string) (Entry, bool) {
	for _, e := range m.Spaces {
		if e.Space == space {
			return e, true
		}
	}
	return Entry{}, false
}

// ParseSpaceList parses a whole space manifest. Version 1 names spaces:
// {"version": 1, "spaces": ["alpha", "beta"]}. Version 2 has one object per space:
// {"version": 2, "spaces": [{"space": "alpha", ...}]}; settings, when not nil, parses each
// whole version 2 entry ("space" included) and should refuse fields it does not know;
// without it an entry may hold "space" only. Unknown fields, a missing version or spaces
// list, an invalid space name (protocol.CheckSpace) and a space named twice refuse the
// manifest, with a message naming the entry.
func ParseSpaceList(data []byte, settings func(entry json.RawMessage) (any, error)) (*SpaceList, error) {
	var doc struct {
		Version *int            `json:"version"`
		Spaces  json.RawMessage `json:"spaces"`
	}
	if err := strictjson.Decode(data, &doc); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("space manifest: the JSON ends early (an empty, truncated or half-written file?): %w", err)
		}
		return nil, fmt.Errorf("space manifest: %w", shape(err, `an object such as {"version": 1, "spaces": ["alpha", "beta"]}`))
	}
	if doc.Version == nil {
		return nil, errors.New("space manifest: no version: want 1 or 2")
	}
	if len(doc.Spaces) == 0 || bytes.Equal(doc.Spaces, []byte("null")) {
		return nil, errors.New("space manifest: no spaces list")
	}
	m := &SpaceList{Version: *doc.Version}
	switch m.Version {
	case 1:
		var names []string
		if err := strictjson.Decode(doc.Spaces, &names); err != nil {
			return nil, fmt.Errorf("space manifest version 1: spaces: %w", shape(err, `a list of space names, such as ["alpha", "beta"]`))
		}
		for _, n := range names {
			m.Spaces = append(m.Spaces, Entry{Space: n})
		}
	case 2:
		var raws []json.RawMessage
		if err := strictjson.Decode(doc.Spaces, &raws); err != nil {
			return nil, fmt.Errorf("space manifest version 2: spaces: %w", shape(err, `a list of objects, such as [{"space": "alpha"}]`))
		}
		for i, raw := range raws {
			e, err := parseEntry(raw, settings)
			if err != nil {
				return nil, fmt.Errorf("space manifest: entry %d: %w", i, err)
			}
			m.Spaces = append(m.Spaces, e)
		}
	default:
		return nil, fmt.Errorf("space manifest: version %d: want 1 or 2", m.Version)
	}
	seen := make(map[string]int, len(m.Spaces))
	ports := map[int]int{}
	for i, e := range m.Spaces {
		if err := protocol.CheckSpace(e.Space); err != nil {
			return nil, fmt.Errorf("space manifest: entry %d: %w", i, err)
		}
		if j, dup := seen[e.Space]; dup {
			return nil, fmt.Errorf("space manifest: entry %d: space %q is named twice (entry %d too)", i, e.Space, j)
		}
		seen[e.Space] = i
		pu, ok := e.Settings.(PortUser)
		if !ok {
			continue
		}
		for _, p := range pu.Ports() {
			if j, dup := ports[p]; dup {
				return nil, fmt.Errorf("space manifest: entry %d (space %q): port %d is named by entry %d (space %q) too; give each space its own port",
					i, e.Space, p, j, m.Spaces[j].Space)
			}
			ports[p] = i
		}
	}
	return m, nil
}

// shape turns a JSON type mismatch into words a person reads: what was expected (want)
// and what JSON kind was found, never a Go type name. Other errors pass through.
func shape(err error, want string) error {
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) {
		return err
	}
	if ute.Field != "" {
		return fmt.Errorf("want %s: %q is a JSON %s", want, ute.Field, ute.Value)
	}
	return fmt.Errorf("want %s, not a JSON %s", want, ute.Value)
}

// PortUser is implemented by entry settings that bind listening ports: no two entries of a
// manifest may name the same port.
type PortUser interface {
	Ports() []int
}

// parseEntry parses one version 2 entry.
func parseEntry(raw json.RawMessage, settings func(json.RawMessage) (any, error)) (Entry, error) {
	var fields map[string]json.RawMessage
	if err := strictjson.Decode(raw, &fields); err != nil || fields == nil {
		return Entry{}, fmt.Errorf("want an object with a space: %s", raw)
	}
	var e Entry
	sp, ok := fields["space"]
	if !ok {
		return e, errors.New("no space")
	}
	if err := json.Unmarshal(sp, &e.Space); err != nil {
		return e, fmt.Errorf("space: %w", shape(err, "a string"))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return e, fmt.Errorf("space %q: %w", e.Space, err)
	}
	e.Raw = compact.Bytes()
	if settings == nil {
		var only struct {
			Space string `json:"space"`
		}
		if err := strictjson.Decode(raw, &only); err != nil {
			return e, fmt.Errorf("space %q: %w", e.Space, err)
		}
		return e, nil
	}
	s, err := settings(raw)
	if err != nil {
		return e, fmt.Errorf("space %q: %w", e.Space, err)
	}
	e.Settings = s
	return e, nil
}
