package selfupdate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Root is a folder whose ancestry CheckAncestors walks.
type Root struct {
	Label string // what it is, for messages: "operator config", "machine home", ...
	Path  string // absolute; it and its parents need not exist yet
	Env   string // the variable that moves it (XDG_CONFIG_HOME); "" when none does
	Base  string // the value Env holds or would hold; with no Env, the folder to run from
}

// UnsafeAncestorError names a folder at or above a root that someone other than the user
// or root could change, and the fix.
type UnsafeAncestorError struct {
	Root   Root
	Path   string // the unsafe folder
	Reason string // "is a symbolic link to /x", "is owned by uid 65534", ...
	Fix    string // a shell command that fixes it
}

// Error names the root, the unsafe folder and why it is unsafe.
func (e *UnsafeAncestorError) Error() string {
	return fmt.Sprintf("%s %s: folder %s %s", e.Root.Label, e.Root.Path, e.Path, e.Reason)
}

// AncestorCheck says whose folders are trusted.
type AncestorCheck struct {
	UID int // the user whose folders are trusted besides root's (os.Geteuid())
	// SystemLinks are the symlinks accepted when root owns them and they resolve to a safe
	// folder (/var/run -> /run); nil means DefaultSystemLinks().
	SystemLinks []string
}

// DefaultSystemLinks are the well-known links of Linux and macOS systems: merged /usr
// (/bin, /lib...), /var/run and /var/lock, and macOS's /tmp, /var and /etc into /private.
func DefaultSystemLinks() []string {
	return []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/var/run", "/var/lock",
		"/tmp", "/var", "/etc", "/home"}
}

// maxLinkDepth bounds system links resolving through system links.
const maxLinkDepth = 8

// CheckAncestors walks every folder from each root up to /, without following links, and
// returns an *UnsafeAncestorError for the first unsafe one: a symlink (other than an
// accepted system link), a folder owned by someone other than the user or root, a folder
// that group or others can write without the sticky bit, or something that is not a folder.
// Parts of a root that do not exist yet are skipped: they are created under their checked
// parents. It reads only; nothing is written.
func (c AncestorCheck) CheckAncestors(roots ...Root) error {
	for _, r := range roots {
		if r.Path == "" {
			continue
		}
		if !filepath.IsAbs(r.Path) {
			return fmt.Errorf("check %s: %s is not an absolute path", r.Label, r.Path)
		}
		if err := c.walk(r, filepath.Clean(r.Path), 0); err != nil {
			return err
		}
	}
	return nil
}

// walk checks dir and each of its parents.
func (c AncestorCheck) walk(r Root, dir string, depth int) error {
	for d := dir; ; d = filepath.Dir(d) {
		if err := c.checkOne(r, d, depth); err != nil {
			return err
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// checkOne checks one folder.
func (c AncestorCheck) checkOne(r Root, d string, depth int) error {
	fi, err := os.Lstat(d)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil // not there yet (or under a file, which the parent's check names)
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", r.Label, err)
	}
	unsafe := func(reason, fix string) error {
		return &UnsafeAncestorError{Root: r, Path: d, Reason: reason, Fix: fix}
	}
	uid, hasOwner := owner(fi)
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(d) // for the message only
		links := c.SystemLinks
		if links == nil {
			links = DefaultSystemLinks()
		}
		if slices.Contains(links, d) && hasOwner && uid == 0 && depth < maxLinkDepth {
			real, err := filepath.EvalSymlinks(d)
			if err != nil {
				return fmt.Errorf("check %s: system link %s: %w", r.Label, d, err)
			}
			if err := c.walk(r, real, depth+1); err != nil {
				return err
			}
			return nil
		}
		return unsafe("is a symbolic link to "+target+" (a link can be pointed elsewhere)", linkFix(r))
	}
	if !fi.IsDir() {
		return unsafe("is not a folder", "mv "+quote(d)+" "+quote(d+".moved"))
	}
	if hasOwner && uid != 0 && uid != c.UID {
		return unsafe(fmt.Sprintf("is owned by uid %d (neither you, uid %d, nor root)", uid, c.UID),
			fmt.Sprintf("sudo chown %d %s", c.UID, quote(d)))
	}
	perm := fi.Mode()
	if perm&0o022 != 0 && perm&fs.ModeSticky == 0 {
		who := "group and others"
		switch {
		case perm&0o020 == 0:
			who = "others"
		case perm&0o002 == 0:
			who = "its group"
		}
		return unsafe(fmt.Sprintf("is writable by %s (mode %04o) and has no sticky bit", who, perm.Perm()), "chmod go-w "+quote(d))
	}
	return nil
}

// linkFix points the root's variable at the real folder, or runs update from the real one.
func linkFix(r Root) string {
	real, err := filepath.EvalSymlinks(r.Base)
	switch {
	case r.Base == "" || err != nil:
		return "replace the link with a real folder"
	case r.Env != "":
		return "export " + r.Env + "=" + quote(real)
	default:
		return "cd " + quote(real) + " && cotal update"
	}
}

// quote quotes s for a POSIX shell when it needs it.
func quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(c rune) bool {
		return !(c == '/' || c == '.' || c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
