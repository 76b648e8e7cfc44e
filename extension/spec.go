package extension

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// FirstPartyModulePrefix is where first-party extension modules live: a module spec under
// it is first-party, and `cotal update` moves such an extension to the CLI's version.
const FirstPartyModulePrefix = "github.com/cotal-ai/"

// ErrBadName reports an extension name that cannot be used.
var ErrBadName = errors.New("invalid extension name")

// Spec is a parsed install spec: a local file, or a Go module path@version.
type Spec struct {
	Raw     string // as given
	File    string // absolute path of a local executable; "" for a module
	Module  string // package path of a module spec; "" for a local file
	Version string // module version (v1.2.3, latest, a commit); "" for a local file
}

// IsModule reports whether s names a Go module to `go install`.
func (s Spec) IsModule() bool { return s.Module != "" }

// String returns the spec as the lock records it: the absolute path, or path@version.
func (s Spec) String() string {
	if s.IsModule() {
		return s.Module + "@" + s.Version
	}
	return s.File
}

// BinaryName is the file name the spec builds or names: the module's last path element
// (the one before a /vN major-version suffix), or the local file's base name.
func (s Spec) BinaryName() string {
	if !s.IsModule() {
		return filepath.Base(s.File)
	}
	elems := strings.Split(s.Module, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && isMajorSuffix(last) {
		last = elems[len(elems)-2]
	}
	return last
}

func isMajorSuffix(s string) bool {
	if len(s) < 2 || s[0] != 'v' {
		return false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ParseSpec reads an install spec. A spec that starts with /, ./, ../ or ~/, or has no @,
// is a local file made absolute against wd; anything else must be a module
// path@version whose first element is a domain (github.com/you/cotal-x@v1.0.0).
func ParseSpec(raw, wd string) (Spec, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return Spec{}, errors.New("empty spec: give a local path or a Go module path@version")
	}
	local := strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") ||
		strings.HasPrefix(s, "~/") || !strings.Contains(s, "@")
	if local {
		if strings.HasPrefix(s, "~/") {
			return Spec{}, fmt.Errorf("spec %q: the shell did not expand ~; give the full path", s)
		}
		if !filepath.IsAbs(s) {
			s = filepath.Join(wd, s)
		}
		return Spec{Raw: raw, File: filepath.Clean(s)}, nil
	}
	at := strings.LastIndex(s, "@")
	mod, ver := s[:at], s[at+1:]
	if err := checkModulePath(mod); err != nil {
		return Spec{}, fmt.Errorf("spec %q: %w", raw, err)
	}
	if ver == "" || strings.ContainsAny(ver, " \t/@") {
		return Spec{}, fmt.Errorf("spec %q: version %q is not a module version (v1.2.3, latest or a commit)", raw, ver)
	}
	return Spec{Raw: raw, Module: mod, Version: ver}, nil
}

// checkModulePath accepts a plausible Go package path: a domain first, clean elements.
func checkModulePath(p string) error {
	if p == "" || path.Clean(p) != p || strings.HasPrefix(p, "/") {
		return fmt.Errorf("module path %q is not clean", p)
	}
	elems := strings.Split(p, "/")
	if !strings.Contains(elems[0], ".") {
		return fmt.Errorf("module path %q does not start with a domain (like github.com/...); a local file needs ./ or /", p)
	}
	for _, e := range elems {
		if e == "" || e == "." || e == ".." || strings.HasPrefix(e, "-") {
			return fmt.Errorf("module path %q has a bad element %q", p, e)
		}
		for _, c := range e {
			ok := c == '.' || c == '-' || c == '_' || c == '~' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
			if !ok {
				return fmt.Errorf("module path %q has a character %q a module path cannot hold", p, c)
			}
		}
	}
	return nil
}

// NameFromFile derives the extension name from an executable's file name: cotal-<name>
// (an .exe suffix is dropped).
func NameFromFile(file string) (string, error) {
	base := strings.TrimSuffix(filepath.Base(file), ".exe")
	name, ok := strings.CutPrefix(base, ExecPrefix)
	if !ok || name == "" {
		return "", fmt.Errorf("%w: cannot tell the name from %q, which is not %s<name>; pass --name", ErrBadName, base, ExecPrefix)
	}
	return name, ValidName(name)
}

// ValidName accepts 1 to 64 lowercase letters, digits, - and _, starting with a letter or
// digit: a name safe as a command, a file name and a path element.
func ValidName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w %q: use 1 to 64 lowercase letters, digits, - or _", ErrBadName, name)
	}
	for i, c := range name {
		ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && (c == '-' || c == '_'))
		if !ok {
			return fmt.Errorf("%w %q: use 1 to 64 lowercase letters, digits, - or _, starting with a letter or digit", ErrBadName, name)
		}
	}
	return nil
}

// IsReleaseVersion reports whether v is a release version (v1.2.3...), one a module can
// be fetched at; a development build ("dev") is not.
func IsReleaseVersion(v string) bool {
	return len(v) > 1 && v[0] == 'v' && v[1] >= '0' && v[1] <= '9'
}

// UpdateSpec is the spec `cotal update` installs rec from. A first-party module extension
// follows the CLI: its module at cliVersion when that is a release version. Everything else,
// and everything under a development CLI, is reinstalled from the spec it was installed from.
func (r Record) UpdateSpec(cliVersion string) string {
	at := strings.LastIndex(r.Spec, "@")
	if r.FirstParty && at > 0 && strings.HasPrefix(r.Spec, FirstPartyModulePrefix) && IsReleaseVersion(cliVersion) {
		return r.Spec[:at] + "@" + cliVersion
	}
	return r.Spec
}
