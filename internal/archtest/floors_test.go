package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/cotal-ai/cotal"

// floors maps a package pattern (a module-relative path, or a path ending in "/..." for
// a whole subtree) to its floor number.
type floors map[string]int

// floorOf returns the floor of a module-relative package path by its longest matching
// pattern, and whether any matched.
func (f floors) floorOf(pkg string) (int, bool) {
	best, floor := -1, 0
	for pattern, n := range f {
		prefix, subtree := strings.CutSuffix(pattern, "/...")
		matched := pkg == prefix || (subtree && strings.HasPrefix(pkg, prefix+"/"))
		if matched && len(prefix) > best {
			best, floor = len(prefix), n
		}
	}
	return floor, best >= 0
}

var (
	floorRow    = regexp.MustCompile(`^\|\s*(\d+)\s*\|([^|]*)\|`)
	packageName = regexp.MustCompile("`([^`]+)`")
)

// parseFloors reads the table under the "## Floors" heading: each row starts with the
// floor number, then the floor's packages in backquotes.
func parseFloors(doc []byte) (floors, error) {
	f := floors{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == "## Floors"
			continue
		}
		m := floorRow.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, p := range packageName.FindAllStringSubmatch(m[2], -1) {
			if prev, dup := f[p[1]]; dup {
				return nil, fmt.Errorf("package %s is on floors %d and %d", p[1], prev, n)
			}
			f[p[1]] = n
		}
	}
	if len(f) == 0 {
		return nil, fmt.Errorf("no floors table (a \"## Floors\" section with rows | N | `pkg` ... |)")
	}
	return f, sc.Err()
}

// violations lists every import of a higher floor, and every package the table does not
// place. graph maps a module-relative package to its module-relative imports.
func violations(f floors, graph map[string][]string) []string {
	var out []string
	for pkg, imports := range graph {
		floor, ok := f.floorOf(pkg)
		if !ok {
			out = append(out, fmt.Sprintf("%s is on no floor: add it to docs/architecture.md's Floors table", pkg))
			continue
		}
		for _, imp := range imports {
			if up, ok := f.floorOf(imp); ok && up > floor {
				out = append(out, fmt.Sprintf("%s (floor %d) imports %s (floor %d)", pkg, floor, imp, up))
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestViolationsFindsAnUpwardImportAndAnUnplacedPackage(t *testing.T) {
	f := floors{"protocol": 0, "client": 1, "internal/cli/...": 3}
	graph := map[string][]string{
		"protocol":        {"client"},
		"client":          {"protocol"},
		"internal/cli/up": {"client", "protocol"},
		"stray":           nil,
	}
	got := violations(f, graph)
	want := []string{
		"protocol (floor 0) imports client (floor 1)",
		"stray is on no floor: add it to docs/architecture.md's Floors table",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestImportsFollowTheFloorsTable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseFloors(doc)
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH to list the import graph: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := relative(fields[0])
		if !ok {
			continue
		}
		graph[pkg] = []string{}
		for _, imp := range fields[1:] {
			if rel, ok := relative(imp); ok {
				graph[pkg] = append(graph[pkg], rel)
			}
		}
	}
	if len(graph) < 20 {
		t.Fatalf("go list found only %d packages: %q", len(graph), out)
	}
	for _, v := range violations(f, graph) {
		t.Error(v)
	}
}

// relative returns a module package's path relative to the module root.
func relative(importPath string) (string, bool) {
	if importPath == module {
		return ".", true
	}
	return strings.CutPrefix(importPath, module+"/")
}
