package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cotal-ai/cotal/protocol"
)

// ErrNoPersona reports that a project has no persona file of the name asked for.
var ErrNoPersona = errors.New("no such persona")

// ErrPersonaExists reports that a persona file is already there and was not replaced.
var ErrPersonaExists = errors.New("persona exists")

// MaxPersonaSize bounds a persona file (1 MiB): front matter and prompt together.
const MaxPersonaSize = 1 << 20

// Persona kinds.
const (
	KindAgent    = "agent"    // an AI agent (the default)
	KindEndpoint = "endpoint" // a program or person that is not an agent
)

// Persona is an agent's identity card and prompt: the file .cotal/agents/<name>.md, YAML
// front matter between --- lines followed by the prompt body.
type Persona struct {
	Name        string // required; the principal's actor (protocol.ValidActor)
	Role        string // presence label and anycast address (a protocol token); "" for none
	Kind        string // KindAgent or KindEndpoint; ParsePersona sets KindAgent when omitted
	Description string // one line for rosters
	Model       string // model the agent runs, e.g. opus
	Agent       string // connector pin (harness), e.g. claude; "" means the launcher's default

	Tags []string // free labels
	// Subscribe is the channels joined at boot, within the read ACL; AllowSubscribe is the
	// read ACL (channel patterns), empty meaning Subscribe. Both omitted (nil) read
	// nothing (DM-only), like an explicit [] (kept non-nil). See protocol.ReadSet.
	Subscribe      []string
	AllowSubscribe []string
	AllowPublish   []string // post ACL (channel patterns); empty means it posts nowhere
	Capabilities   []string // spawn, run, role:<role>
	Quiet          []string // channel patterns buffered for pull only
	Muted          []string // channel patterns dropped on receive

	// Meta holds the front matter keys this struct has no field for (variant,
	// launchOptions, owner, ...), decoded as YAML values, for connectors. nil when none.
	Meta map[string]any

	Prompt string // the body after the front matter, as written
	Path   string // the file it was read from or written to; "" for one built in memory
}

// ReadACL returns the channels the persona may read: AllowSubscribe, or Subscribe when
// AllowSubscribe is empty; none when both are omitted (protocol.ReadSet).
func (per *Persona) ReadACL() []string {
	_, allow := protocol.ReadSet(per.Subscribe, per.AllowSubscribe)
	return allow
}

// BootSet returns the channels the persona joins at boot: Subscribe, none when it is
// omitted (protocol.ReadSet).
func (per *Persona) BootSet() []string {
	sub, _ := protocol.ReadSet(per.Subscribe, per.AllowSubscribe)
	return sub
}

// ReadSetOmitted reports whether the persona names neither subscribe nor allowSubscribe,
// so that it is DM-only (it reads no channel).
func (per *Persona) ReadSetOmitted() bool {
	return per.Subscribe == nil && per.AllowSubscribe == nil
}

// DMOnlyNote is the line a command prints when it runs a persona that names no channel
// ("" for one that names any): such a persona is DM-only, where an earlier release read
// general, so the change is said, with how to keep general, rather than made silently.
func (per *Persona) DMOnlyNote() string {
	if !per.ReadSetOmitted() {
		return ""
	}
	return fmt.Sprintf("note: persona %s names no channel, so it is DM-only (it reads no channel; before this release it read general): to keep general add subscribe: [general] to %s",
		per.Name, per.fileName())
}

// fileName is where the persona was read from, or its usual place when it was built in memory.
func (per *Persona) fileName() string {
	if per.Path != "" {
		return per.Path
	}
	return ".cotal/agents/" + per.Name + ".md"
}

// UncoveredSubscribe returns the Subscribe entries outside the read ACL: when AllowSubscribe
// is set, the boot joins that no entry of it covers (a pattern needs an equal or broader
// one). Validate refuses a persona with any.
func (per *Persona) UncoveredSubscribe() []string {
	if len(per.AllowSubscribe) == 0 {
		return nil
	}
	var out []string
	for _, ch := range per.Subscribe {
		if !protocol.ChannelCovered(per.AllowSubscribe, ch) {
			out = append(out, ch)
		}
	}
	return out
}

// personaKeys returns the front matter keys with a Persona field, in the order Render writes.
func personaKeys() []string {
	return []string{"name", "role", "kind", "description", "tags", "subscribe", "allowSubscribe",
		"allowPublish", "quiet", "muted", "capabilities", "model", "agent"}
}

// CheckPersonaName refuses a name that cannot be a persona's: it becomes the actor token of
// the agent's principal and its file name, so 1 to 64 letters, digits or _.
func CheckPersonaName(name string) error {
	if !protocol.ValidActor(name) {
		return fmt.Errorf("name %q: use 1 to %d letters, digits or _ (no dots, dashes or spaces): it becomes the agent's actor", name, protocol.MaxActorLength)
	}
	return nil
}

// fieldError is a Validate failure tied to one front matter key and, for lists, the index
// of the entry; ParsePersona turns it into a ParseError at that line.
type fieldError struct {
	key   string
	index int  // -1 for the key's value as a whole
	bare  bool // err names the key itself
	err   error
}

func (e *fieldError) Error() string {
	if e.bare {
		return e.err.Error()
	}
	return e.key + ": " + e.err.Error()
}

func (e *fieldError) Unwrap() error { return e.err }

// Validate checks a persona without I/O: a valid name, a token role, a known kind and
// capabilities, channel patterns in every channel list, and a boot read set within the read
// ACL. The error names the front matter key that is wrong.
func (per *Persona) Validate() error {
	fe := func(key string, i int, format string, args ...any) error {
		return &fieldError{key: key, index: i, err: fmt.Errorf(format, args...)}
	}
	if per.Name == "" {
		return &fieldError{key: "name", index: -1, bare: true,
			err: fmt.Errorf("name is required: the agent's actor, 1 to %d letters, digits or _", protocol.MaxActorLength)}
	}
	if err := CheckPersonaName(per.Name); err != nil {
		return &fieldError{key: "name", index: -1, bare: true, err: err}
	}
	if per.Role != "" {
		if err := protocol.CheckRole(per.Role); err != nil {
			return fe("role", -1, "%v (it names the anycast queue)", err)
		}
	}
	switch per.Kind {
	case "", KindAgent, KindEndpoint:
	default:
		return fe("kind", -1, "%q: want %s or %s", per.Kind, KindAgent, KindEndpoint)
	}
	if per.Agent != "" && !protocol.ValidToken(per.Agent) {
		return fe("agent", -1, "%q: a connector name such as claude (letters, digits, _ and -)", per.Agent)
	}
	for _, f := range []struct {
		key string
		v   string
	}{{"description", per.Description}, {"model", per.Model}} {
		if strings.ContainsAny(f.v, "\r\n") {
			return fe(f.key, -1, "must be one line")
		}
	}
	for i, t := range per.Tags {
		if t == "" || strings.ContainsAny(t, "\r\n") {
			return fe("tags", i, "entry %d: want a non-empty one-line label", i+1)
		}
	}
	for _, l := range []struct {
		key string
		chs []string
	}{{"subscribe", per.Subscribe}, {"allowSubscribe", per.AllowSubscribe}, {"allowPublish", per.AllowPublish},
		{"quiet", per.Quiet}, {"muted", per.Muted}} {
		for i, ch := range l.chs {
			if err := protocol.CheckChannelPattern(ch); err != nil {
				return &fieldError{key: l.key, index: i, err: err}
			}
		}
	}
	if len(per.AllowSubscribe) > 0 {
		for i, ch := range per.Subscribe {
			if !protocol.ChannelCovered(per.AllowSubscribe, ch) {
				return fe("subscribe", i, "%q is outside the read ACL (allowSubscribe: [%s]): add it, or a pattern covering it, to allowSubscribe",
					ch, strings.Join(per.AllowSubscribe, ", "))
			}
		}
	}
	for i, c := range per.Capabilities {
		if err := CheckCapability(c); err != nil {
			return &fieldError{key: "capabilities", index: i, err: err}
		}
	}
	return nil
}

// CheckCapability accepts an agent's capability: spawn, run or role:<role>. Every place
// that takes capabilities (a persona file, COTAL_CAPABILITIES) checks them with it.
func CheckCapability(c string) error {
	switch {
	case c == "spawn", c == "run":
		return nil
	case c == "admin":
		return errors.New(`"admin" is never granted to an agent: use spawn, run or role:<role>`)
	case strings.HasPrefix(c, "role:"):
		if err := protocol.CheckRole(strings.TrimPrefix(c, "role:")); err != nil {
			return fmt.Errorf("capability role:<role>: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown capability %q: want spawn, run or role:<role>", c)
}

// ParsePersona reads a persona file: a --- line, YAML front matter, a --- line, then the
// prompt. Keys without a Persona field are kept in Meta; a key whose value has the wrong
// shape (a list for a string, a map for a list) is refused. Every error is a *ParseError
// naming path and the line that is wrong. Kind defaults to KindAgent.
func ParsePersona(path string, data []byte) (*Persona, error) {
	return parsePersona(path, data, "")
}

// parsePersona is ParsePersona; a non-empty fileName must equal the name key.
func parsePersona(path string, data []byte, fileName string) (*Persona, error) {
	y := &yamlFile{path: path, offset: 1} // the front matter starts on line 2
	if len(data) > MaxPersonaSize {
		return nil, y.errLine(1, "%d bytes is over the %d-byte limit of a persona file", len(data), MaxPersonaSize)
	}
	front, body, err := splitFrontMatter(data)
	if err != nil {
		return nil, &ParseError{Path: path, Line: 1, Err: err}
	}
	root, err := y.document(front)
	if err != nil {
		return nil, err
	}
	per := &Persona{Prompt: string(body), Path: path}
	values := map[string]*yaml.Node{}
	if root != nil {
		pairs, err := y.mapping(root, "front matter")
		if err != nil {
			return nil, err
		}
		for _, kv := range pairs {
			values[kv.key] = kv.value
			if err := y.personaField(per, kv); err != nil {
				return nil, err
			}
		}
	}
	if per.Kind == "" {
		per.Kind = KindAgent
	}
	lineOf := func(key string, i int) int {
		n, ok := values[key]
		if !ok {
			return 1 // a missing key: the front matter's opening line
		}
		n = resolve(n)
		if i >= 0 && n.Kind == yaml.SequenceNode && i < len(n.Content) {
			n = n.Content[i]
		}
		return n.Line + y.offset
	}
	if err := per.Validate(); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return nil, &ParseError{Path: path, Line: lineOf(fe.key, fe.index), Err: err}
		}
		return nil, &ParseError{Path: path, Line: 1, Err: err}
	}
	if fileName != "" && per.Name != fileName {
		return nil, &ParseError{Path: path, Line: lineOf("name", -1),
			Err: fmt.Errorf("name %q does not match the file name %s.md: rename the file or change the name", per.Name, fileName)}
	}
	return per, nil
}

// personaField stores one front matter key in per.
func (y *yamlFile) personaField(per *Persona, kv keyValue) error {
	var err error
	strField := map[string]*string{"name": &per.Name, "role": &per.Role, "kind": &per.Kind,
		"description": &per.Description, "model": &per.Model, "agent": &per.Agent}
	listField := map[string]*[]string{"tags": &per.Tags, "subscribe": &per.Subscribe,
		"allowSubscribe": &per.AllowSubscribe, "allowPublish": &per.AllowPublish,
		"capabilities": &per.Capabilities, "quiet": &per.Quiet, "muted": &per.Muted}
	if p, ok := strField[kv.key]; ok {
		*p, err = y.str(kv.value, kv.key)
		return err
	}
	if p, ok := listField[kv.key]; ok {
		*p, err = y.strs(kv.value, kv.key)
		if *p == nil && err == nil && (kv.key == "subscribe" || kv.key == "allowSubscribe") && resolve(kv.value).Kind == yaml.SequenceNode {
			*p = []string{} // an explicit [] reads nothing; omitted or null reads the default
		}
		return err
	}
	if near := nearKey(kv.key, personaKeys()); near != "" {
		return y.errAt(kv.keyNode, "unknown key %q: did you mean %s?", kv.key, near)
	}
	v, err := y.anyValue(kv.value, kv.key)
	if err != nil {
		return err
	}
	if per.Meta == nil {
		per.Meta = map[string]any{}
	}
	per.Meta[kv.key] = v
	return nil
}

// splitFrontMatter splits a persona file into its front matter (without the --- lines)
// and the body after the closing --- line. A leading UTF-8 byte order mark is dropped.
func splitFrontMatter(data []byte) (front, body []byte, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	if !isFence(first) {
		return nil, nil, errors.New("no front matter: a persona starts with a --- line, then YAML keys (name: ...), a --- line, and the prompt")
	}
	for off := 0; off < len(rest); {
		line, _, found := bytes.Cut(rest[off:], []byte("\n"))
		if isFence(line) {
			end := off + len(line)
			if found {
				end++
			}
			return rest[:off], rest[end:], nil
		}
		if !found {
			break
		}
		off += len(line) + 1
	}
	return nil, nil, errors.New("the front matter opened by this --- line is never closed by another --- line")
}

// isFence reports whether line is "---", trailing spaces and a carriage return aside.
func isFence(line []byte) bool {
	return string(bytes.TrimRight(line, " \t\r")) == "---"
}

// Render validates per and returns its file: front matter in a fixed key order (Meta keys
// sorted, after the known ones), then the prompt exactly as it is, so that ParsePersona
// gives per back.
func (per *Persona) Render() ([]byte, error) {
	if err := per.Validate(); err != nil {
		return nil, fmt.Errorf("persona %q: %w", per.Name, err)
	}
	doc := &yaml.Node{Kind: yaml.MappingNode}
	add := func(key string, v *yaml.Node) {
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	}
	str := func(key, v string) {
		if v != "" {
			add(key, strNode(v))
		}
	}
	list := func(key string, vs []string) {
		if len(vs) > 0 || (vs != nil && (key == "subscribe" || key == "allowSubscribe")) {
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
			for _, v := range vs {
				n.Content = append(n.Content, strNode(v))
			}
			add(key, n)
		}
	}
	str("name", per.Name)
	str("role", per.Role)
	str("kind", per.Kind)
	str("description", per.Description)
	list("tags", per.Tags)
	list("subscribe", per.Subscribe)
	list("allowSubscribe", per.AllowSubscribe)
	list("allowPublish", per.AllowPublish)
	list("quiet", per.Quiet)
	list("muted", per.Muted)
	list("capabilities", per.Capabilities)
	str("model", per.Model)
	str("agent", per.Agent)
	keys := make([]string, 0, len(per.Meta))
	for k := range per.Meta {
		if isPersonaKey(k) {
			return nil, fmt.Errorf("persona %q: meta key %q has a field of its own", per.Name, k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n := &yaml.Node{}
		if err := n.Encode(per.Meta[k]); err != nil {
			return nil, fmt.Errorf("persona %q: meta key %q: %w", per.Name, k, err)
		}
		add(k, n)
	}
	var b bytes.Buffer
	b.WriteString("---\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("persona %q: encode front matter: %w", per.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("persona %q: encode front matter: %w", per.Name, err)
	}
	b.WriteString("---\n")
	b.WriteString(per.Prompt)
	return b.Bytes(), nil
}

func isPersonaKey(k string) bool {
	for _, pk := range personaKeys() {
		if k == pk {
			return true
		}
	}
	return false
}
