package claims

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxPathLength bounds a claimed path, in bytes after normalising.
const MaxPathLength = 512

// Normalize turns p into the form a claim stores: slash-separated, relative to the
// repository, cleaned, with no trailing slash; "." is the whole repository. root is the
// repository's absolute path, or "" when unknown: an absolute p under root is made
// relative to it, any other absolute p is refused, as is a p that climbs out of the
// repository (".."), holds a glob, a control character or invalid UTF-8. A path is data:
// nothing is opened, stat'ed or resolved on disk.
func Normalize(p, root string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New("path is empty: name a file or directory relative to the repository")
	}
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("path %q is not valid UTF-8", p)
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return "", fmt.Errorf("path %q holds a control character", p)
		}
	}
	if strings.ContainsAny(p, "*?[") {
		return "", fmt.Errorf("path %q holds a glob character (* ? [): claim the directory instead", p)
	}
	p = strings.ReplaceAll(p, `\`, "/")
	if path.IsAbs(p) || filepath.VolumeName(p) != "" {
		rel, ok := under(p, root)
		if !ok {
			return "", fmt.Errorf("path %q is absolute and outside the repository: give it relative to the repository root", p)
		}
		p = rel
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the repository (..): give it relative to the repository root", p)
	}
	if len(c) > MaxPathLength {
		return "", fmt.Errorf("path of %d bytes: at most %d", len(c), MaxPathLength)
	}
	return c, nil
}

// under returns abs relative to root when abs is root or lies inside it.
func under(abs, root string) (string, bool) {
	if root == "" {
		return "", false
	}
	r := path.Clean(strings.ReplaceAll(root, `\`, "/"))
	a := path.Clean(abs)
	if !path.IsAbs(r) {
		return "", false
	}
	if a == r {
		return ".", true
	}
	if r == "/" {
		return strings.TrimPrefix(a, "/"), true
	}
	if rest, ok := strings.CutPrefix(a, r+"/"); ok {
		return rest, true
	}
	return "", false
}

// Overlap reports whether two normalised paths overlap: the same path, or one a
// directory that holds the other. "." (the whole repository) overlaps every path.
func Overlap(a, b string) bool {
	switch {
	case a == b, a == ".", b == ".":
		return true
	}
	return strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// Conflicts reports whether a claim of path a (exclusive or shared) conflicts with a held
// claim of path b: they overlap and at least one of them is exclusive.
func Conflicts(a string, aExclusive bool, b string, bExclusive bool) bool {
	return (aExclusive || bExclusive) && Overlap(a, b)
}
