package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ParseError is a refusal of a persona file or a manifest: the file, the 1-based line that
// is wrong in it, and why. It prints as <path>:<line>: <why>.
type ParseError struct {
	Path string
	Line int
	Err  error
}

// Error prints <path>:<line>: <why>.
func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err) }

// Unwrap returns why the input was refused.
func (e *ParseError) Unwrap() error { return e.Err }

// yamlFile reads one YAML document of a file with positions: a node's file line is its
// line in the document plus offset.
type yamlFile struct {
	path   string
	offset int
}

// keyValue is one entry of a YAML mapping.
type keyValue struct {
	key     string
	keyNode *yaml.Node
	value   *yaml.Node
}

func (y *yamlFile) errLine(line int, format string, args ...any) error {
	return &ParseError{Path: y.path, Line: line, Err: fmt.Errorf(format, args...)}
}

func (y *yamlFile) errAt(n *yaml.Node, format string, args ...any) error {
	return y.errLine(n.Line+y.offset, format, args...)
}

// document parses data as exactly one YAML document and returns its root node, nil when
// the document is empty (or only comments). Syntax errors carry the file line.
func (y *yamlFile) document(data []byte) (root *yaml.Node, err error) {
	defer func() {
		// yaml.v3 reports its own failures as errors; a panic from a parser bug is turned
		// into a refusal of the input rather than a crash of the command.
		if r := recover(); r != nil {
			root, err = nil, y.errLine(1+y.offset, "yaml: cannot parse this document (%v)", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, y.syntaxError(data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, y.syntaxError(data, err)
	default:
		return nil, y.errAt(&next, "a second YAML document: one per file")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	root = doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	return root, nil
}

// syntaxError turns a yaml.v3 error into a ParseError at the line it is about. yaml.v3
// numbers the lines of its parser errors from 0 and those of its scanner errors from 1,
// and names no line for a problem on the first line; errors without a line are placed at
// the first line holding what they complain about (a tab indent, a control character, an
// unknown anchor), else at line 1.
func (y *yamlFile) syntaxError(data []byte, err error) error {
	msg := err.Error()
	last := strings.Count(string(data), "\n")
	if len(data) > 0 && data[len(data)-1] != '\n' {
		last++
	}
	if rest, ok := strings.CutPrefix(msg, "yaml: line "); ok {
		num, why, _ := strings.Cut(rest, ": ")
		if n, convErr := strconv.Atoi(num); convErr == nil && n > 0 {
			if isParserProblem(why) {
				n++
			}
			n = max(1, min(n, last))
			return y.errLine(n+y.offset, "yaml: %s", why)
		}
	}
	anchor := ""
	if rest, ok := strings.CutPrefix(msg, "yaml: unknown anchor '"); ok {
		anchor, _, _ = strings.Cut(rest, "'")
	}
	line := 1
	for i, l := range strings.Split(string(data), "\n") {
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if strings.Contains(indent, "\t") || strings.ContainsFunc(l, isControl) || anchor != "" && strings.Contains(l, "*"+anchor) {
			line = i + 1
			break
		}
	}
	return y.errLine(line+y.offset, "%s", msg)
}

// isParserProblem reports whether why is one of yaml.v3's parser (not scanner) problems,
// whose line it reports counted from 0.
func isParserProblem(why string) bool {
	switch why {
	case "did not find expected <stream-start>", "did not find expected <document start>",
		"found undefined tag handle", "did not find expected node content", "did not find expected '-' indicator",
		"did not find expected key", "did not find expected ',' or ']'", "did not find expected ',' or '}'",
		"found duplicate %YAML directive", "found incompatible YAML document", "found duplicate %TAG directive":
		return true
	}
	return false
}

func isControl(r rune) bool { return r < 0x20 && r != '\t' && r != '\r' || r == 0x7f }

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// kindName says what a node is, for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

// mapping returns the entries of a mapping node in order; what names it in messages. Keys
// are scalars, taken as written; a repeated key is refused.
func (y *yamlFile) mapping(n *yaml.Node, what string) ([]keyValue, error) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return nil, y.errAt(n, "%s: want a map of keys, not %s", what, kindName(n))
	}
	seen := map[string]int{}
	out := make([]keyValue, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			return nil, y.errAt(k, "%s: a key must be a plain word, not %s", what, kindName(k))
		}
		if line, dup := seen[k.Value]; dup {
			return nil, y.errAt(k, "%s: key %q repeats the one on line %d", what, k.Value, line)
		}
		seen[k.Value] = k.Line + y.offset
		out = append(out, keyValue{key: k.Value, keyNode: k, value: v})
	}
	return out, nil
}

// str reads a string value: any scalar, as written (so model: 3.10 stays "3.10"); null is "".
func (y *yamlFile) str(n *yaml.Node, key string) (string, error) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		return "", y.errAt(n, "%s: want a string, not %s", key, kindName(n))
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	return n.Value, nil
}

// strs reads a list of strings: a sequence of non-null scalars; null and [] are nil.
func (y *yamlFile) strs(n *yaml.Node, key string) ([]string, error) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, y.errAt(n, "%s: want a list such as [a, b], not %s", key, kindName(n))
	}
	var out []string // nil for [], so an empty list and none are the same
	for i, c := range n.Content {
		c = resolve(c)
		if c.Kind != yaml.ScalarNode || c.Tag == "!!null" {
			return nil, y.errAt(c, "%s: entry %d: want a string, not %s", key, i+1, kindName(c))
		}
		out = append(out, c.Value)
	}
	return out, nil
}

// boolean reads true or false; null is nil.
func (y *yamlFile) boolean(n *yaml.Node, key string) (*bool, error) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return nil, y.errAt(n, "%s: want true or false, not %s", key, kindName(n))
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return nil, y.errAt(n, "%s: %w", key, err)
	}
	return &b, nil
}

// anyValue decodes a value of no fixed shape (opaque meta, launch options). Maps come out
// as map[string]any whatever their keys, so the value also encodes as JSON.
func (y *yamlFile) anyValue(n *yaml.Node, key string) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, y.errAt(n, "%s: cannot decode this value (%v)", key, r)
		}
	}()
	if err := n.Decode(&v); err != nil {
		return nil, y.errAt(n, "%s: %w", key, err)
	}
	return jsonable(v), nil
}

// jsonable rewrites map[any]any (YAML maps with non-string keys) to map[string]any.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonable(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonable(e)
		}
		return t
	}
	return v
}

// strNode is a YAML string scalar; the encoder quotes it when it would read as another type.
func strNode(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

// nearKey returns the known key that key spells with another case or with _ or -, or "".
func nearKey(key string, known []string) string {
	fold := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, k := range known {
		if k != key && fold(k) == fold(key) {
			return k
		}
	}
	return ""
}

// typoOf returns the key of known that key most likely misspells (another case, _ or -, or
// at most two edits away), or "".
func typoOf(key string, known []string) string {
	if k := nearKey(key, known); k != "" {
		return k
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestD && d*3 <= len(k) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of two short strings (bytes):
// insertions, deletions, substitutions and swaps of neighbours each count one.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
