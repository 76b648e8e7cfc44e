package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// expiryWarning is how soon before a credential expires doctor warns about it.
const expiryWarning = 24 * time.Hour

// fixNext is the next line of a check --fix repairs.
const fixNext = "cotal doctor --fix"

// doctor runs the checks of one invocation.
type doctor struct {
	opts   *Options
	wd     string
	proj   *workspace.Project // nil outside a project
	mesh   *workspace.Mesh    // the project's mesh record, nil without one
	spaces []string           // the spaces checked
	up     bool               // the mesh's broker process runs
	checks []Check
}

func newDoctor(opts *Options) (*doctor, error) {
	wd, err := opts.Getwd()
	if err != nil {
		return nil, fmt.Errorf("doctor: working folder: %w", err)
	}
	return &doctor{opts: opts, wd: wd}, nil
}

// add records a check; a fixable one is repaired at once under --fix.
func (d *doctor) add(c Check) {
	if c.fix != nil {
		c.Fixable = true
		if c.Next == "" {
			c.Next = fixNext
		}
	}
	if d.opts.Fix && c.fix != nil && (c.Status == StatusFail || c.Status == StatusWarn) {
		did, err := c.fix()
		if err != nil {
			c.Message += "; --fix could not repair it: " + err.Error()
		} else {
			c.Status, c.Message, c.Next = StatusFixed, did, ""
		}
	}
	d.checks = append(d.checks, c)
}

func (d *doctor) ok(check, subject, msg string) {
	d.add(Check{Check: check, Subject: subject, Status: StatusOK, Message: msg})
}

// rel is path as the person at the keyboard types it: relative to the working folder when
// it lies below it.
func (d *doctor) rel(path string) string {
	if r, err := filepath.Rel(d.wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// findProject locates the project and its mesh record; without either, the checks that
// need them are skipped with a line saying so.
func (d *doctor) findProject() bool {
	proj, err := workspace.FindProject(d.wd, d.opts.Getenv)
	if err != nil {
		c := Check{Check: "project", Status: StatusFail, Message: err.Error()}
		if errors.Is(err, workspace.ErrNoProject) {
			c.Message = "no .cotal/ was found from " + d.wd + " upward: doctor checks a project and the mesh it runs; cotal up makes one"
			c.Next = "cotal up --detach"
			if ferr := workspace.ControlFileFrom(d.wd); ferr != nil {
				c.Message, c.Next = ferr.Error(), "" // moving the file aside is the person's call
			}
		}
		d.add(c)
		return false
	}
	d.proj = proj
	mesh, err := proj.ReadMesh()
	switch {
	case errors.Is(err, workspace.ErrNoMesh):
		d.add(Check{Check: "mesh", Subject: proj.Root, Status: StatusWarn,
			Message: "no mesh is recorded: nothing runs here; the mesh checks are skipped", Next: "cotal up --detach"})
	case err != nil:
		d.add(Check{Check: "mesh", Subject: d.rel(proj.MeshFile()), Status: StatusFail, Message: err.Error()})
	default:
		d.mesh = mesh
		d.up = cmdutil.MeshRunning(proj)
	}
	switch {
	case d.opts.Space != "":
		d.spaces = []string{d.opts.Space}
		if d.mesh != nil && !slices.Contains(d.mesh.Spaces, d.opts.Space) {
			d.add(Check{Check: "mesh", Subject: "space " + d.opts.Space, Status: StatusFail,
				Message: "the project's mesh does not serve it", Next: "cotal up --space " + d.opts.Space})
			d.spaces = nil
		}
	case d.mesh != nil:
		d.spaces = d.mesh.Spaces
	}
	return true
}

// checkVersion reports this binary, the project's cotal.yaml as this binary reads it, and
// whether the running mesh was started from this binary.
func (d *doctor) checkVersion() {
	exe, _ := d.opts.Executable()
	d.ok("version", "", "cotal "+d.opts.Version+" ("+exe+")")
	if d.proj == nil {
		return
	}
	manifest := filepath.Join(d.proj.Root, "cotal.yaml")
	if _, err := os.Stat(manifest); err == nil {
		if _, err := workspace.LoadManifest(manifest); err != nil {
			d.add(Check{Check: "version", Subject: d.rel(manifest), Status: StatusFail,
				Message: "this cotal cannot read it: " + err.Error()})
		} else {
			d.ok("version", d.rel(manifest), "reads as "+workspace.ManifestAPIVersion)
		}
	}
	if d.mesh == nil || !d.up || d.mesh.PID <= 0 {
		return
	}
	running, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", d.mesh.PID))
	if err != nil {
		return // not Linux, or not ours to read: nothing to compare
	}
	self, _ := filepath.EvalSymlinks(exe)
	switch {
	case strings.HasSuffix(running, " (deleted)"):
		d.add(Check{Check: "version", Subject: "mesh pid " + fmt.Sprint(d.mesh.PID), Status: StatusWarn,
			Message: "the mesh runs a cotal binary replaced since it started (" + running + "); it keeps the old one until restarted",
			Next:    "cotal down && cotal up --detach"})
	case self != "" && running != self:
		d.add(Check{Check: "version", Subject: "mesh pid " + fmt.Sprint(d.mesh.PID), Status: StatusWarn,
			Message: "the mesh runs " + running + ", not this cotal (" + self + ")"})
	default:
		d.ok("version", "mesh pid "+fmt.Sprint(d.mesh.PID), "the mesh runs this cotal")
	}
}

// authMesh reports whether the project keeps a trust chain to check.
func (d *doctor) authMesh() bool {
	if d.proj == nil {
		return false
	}
	if d.mesh != nil {
		return d.mesh.Mode == workspace.ModeAuth
	}
	_, err := os.Stat(filepath.Join(d.proj.AuthDir(), "broker.json"))
	return err == nil
}

// checkTrust checks the trust folder's mode, that the operator keys load and agree, and
// that every space checked has its account. It creates nothing.
func (d *doctor) checkTrust() {
	if !d.authMesh() {
		return
	}
	dir := d.proj.AuthDir()
	fi, err := os.Stat(dir)
	if err != nil {
		d.add(Check{Check: "trust", Subject: d.rel(dir), Status: StatusFail,
			Message: "the trust chain is missing (" + err.Error() + "): every credential of the mesh was signed by it; restore it from a backup"})
		return
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		d.add(Check{Check: "trust", Subject: d.rel(dir), Status: StatusFail,
			Message: fmt.Sprintf("mode %04o, want 0700: other users can list the keys folder", perm),
			fix:     chmod(dir, 0o700)})
		if !d.opts.Fix {
			return // opening the chain sets the mode: leave it to --fix
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "broker.json")); err != nil {
		d.add(Check{Check: "trust", Subject: d.rel(filepath.Join(dir, "broker.json")), Status: StatusFail,
			Message: "the operator's keys are missing (" + err.Error() + "): restore the file from a backup"})
		return
	}
	chain, err := trust.Open(dir)
	if err != nil {
		d.add(Check{Check: "trust", Subject: d.rel(dir), Status: StatusFail, Message: err.Error()})
		return
	}
	have, err := chain.Spaces()
	if err != nil {
		d.add(Check{Check: "trust", Subject: d.rel(dir), Status: StatusFail, Message: err.Error()})
		return
	}
	for _, s := range d.spaces {
		if !slices.Contains(have, s) {
			d.add(Check{Check: "trust", Subject: "space " + s, Status: StatusFail,
				Message: "no account in the trust chain: the mesh serves a space its keys do not sign; restore " + d.rel(dir) + " from a backup"})
			continue
		}
		acct, err := chain.Space(s) // loads an existing account; checked above that it exists
		if err != nil {
			d.add(Check{Check: "trust", Subject: "space " + s, Status: StatusFail, Message: err.Error()})
			continue
		}
		d.ok("trust", "space "+s, "operator "+short(chain.OperatorPublicKey())+" signs account "+short(acct.PublicKey()))
	}
}

func short(key string) string {
	if len(key) > 12 {
		return key[:12] + "…"
	}
	return key
}

// checkFiles checks every creds file under .cotal/ (mode 0600, not expired) and every key
// file of the trust chain (mode 0600).
func (d *doctor) checkFiles() {
	if d.proj == nil {
		return
	}
	store := ""
	if d.mesh != nil {
		store = d.mesh.StoreDir
	}
	authDir := d.proj.AuthDir()
	n, keysOK := 0, 0
	_ = filepath.WalkDir(d.proj.Dir(), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // a folder it cannot read: the trust check names what matters
		}
		if e.IsDir() {
			if path == store || path == filepath.Join(d.proj.Dir(), "nats") {
				return filepath.SkipDir // the JetStream store: the broker's own files
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".creds"):
			n++
			d.checkCreds(path)
		case strings.HasPrefix(path, authDir+string(filepath.Separator)) && (strings.HasSuffix(path, ".json") || strings.HasSuffix(path, ".jwt") || strings.HasSuffix(path, ".seed")):
			n++
			if d.checkMode("key", path) {
				keysOK++
			}
		}
		return nil
	})
	if keysOK > 0 {
		d.ok("key", d.rel(authDir), cmdutil.Count(keysOK, "key file")+" of the trust chain, mode 0600")
	}
	if n == 0 {
		d.ok("creds", d.rel(d.proj.Dir()), "no creds or key files")
	}
}

// checkMode fails a secret file other users can read.
func (d *doctor) checkMode(check, path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		d.add(Check{Check: check, Subject: d.rel(path), Status: StatusFail, Message: err.Error()})
		return false
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		d.add(Check{Check: check, Subject: d.rel(path), Status: StatusFail,
			Message: fmt.Sprintf("mode %04o, want 0600: other users can read the key in it", perm),
			fix:     chmod(path, 0o600)})
		return false
	}
	return true
}

// checkCreds checks a creds file's mode and expiry.
func (d *doctor) checkCreds(path string) {
	modeOK := d.checkMode("creds", path)
	b, err := cmdutil.ReadCredsFile("creds", path)
	if err != nil {
		d.add(Check{Check: "creds", Subject: d.rel(path), Status: StatusFail, Message: err.Error()})
		return
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		d.add(Check{Check: "creds", Subject: d.rel(path), Status: StatusFail, Message: "not a creds file cotal can read: " + err.Error()})
		return
	}
	now := d.opts.Now()
	switch left := c.Expires.Sub(now); {
	case c.Expires.IsZero():
		if modeOK {
			d.ok("creds", d.rel(path), "mode 0600, no expiry")
		}
	case left <= 0:
		d.add(Check{Check: "creds", Subject: d.rel(path), Status: StatusFail,
			Message: "expired " + c.Expires.UTC().Format("2006-01-02 15:04:05Z") + ": the broker refuses it; mint a new one in its place",
			Next:    remint(c, d.rel(path))})
	case left < expiryWarning:
		d.add(Check{Check: "creds", Subject: d.rel(path), Status: StatusWarn,
			Message: "expires " + c.Expires.UTC().Format("2006-01-02 15:04:05Z") + ", within a day",
			Next:    remint(c, d.rel(path))})
	default:
		if modeOK {
			d.ok("creds", d.rel(path), "mode 0600, expires "+c.Expires.UTC().Format("2006-01-02"))
		}
	}
}

// remint is the cotal mint that replaces an observer's or admin's creds file, whose flags
// the credential itself records; "" for others (an agent's ACL flags are its minter's).
func remint(c trust.Creds, path string) string {
	if (c.Profile != trust.ProfileObserver && c.Profile != trust.ProfileAdmin) || c.Principal.Actor == "" {
		return ""
	}
	return "cotal mint " + c.Principal.Actor + " --profile " + string(c.Profile) + " --out " + cmdutil.ShellQuote(path) + " --force"
}

// chmod is the repair that sets path's mode.
func chmod(path string, mode os.FileMode) func() (string, error) {
	return func() (string, error) {
		if err := os.Chmod(path, mode); err != nil {
			return "", fmt.Errorf("chmod %s: %w", path, err)
		}
		return fmt.Sprintf("mode set to %04o", mode), nil
	}
}

// checkPidfiles checks every pidfile in .cotal/: a pidfile whose process is gone is stale.
func (d *doctor) checkPidfiles() {
	if d.proj == nil {
		return
	}
	files, _ := filepath.Glob(filepath.Join(d.proj.Dir(), "*.pid"))
	for _, f := range files {
		rec, err := workspace.ReadPidfile(f)
		if err != nil {
			d.add(Check{Check: "pidfile", Subject: d.rel(f), Status: StatusFail, Message: err.Error()})
			continue
		}
		alive, err := rec.Alive()
		switch {
		case err != nil:
			d.add(Check{Check: "pidfile", Subject: d.rel(f), Status: StatusWarn, Message: err.Error()})
		case alive:
			d.ok("pidfile", d.rel(f), fmt.Sprintf("pid %d runs", rec.PID))
		default:
			d.add(Check{Check: "pidfile", Subject: d.rel(f), Status: StatusFail,
				Message: fmt.Sprintf("stale: pid %d is gone (a crash, or a kill)", rec.PID),
				fix: func() (string, error) {
					if err := workspace.RemovePidfile(f); err != nil {
						return "", err
					}
					return fmt.Sprintf("removed (pid %d was gone)", rec.PID), nil
				}})
		}
	}
}

// userAuth reports whether space is a user-auth space of this project (it has an IdP pin).
func (d *doctor) userAuth(space string) (authsvc.Pin, bool) {
	if d.proj == nil {
		return authsvc.Pin{}, false
	}
	pin, err := authsvc.ReadPin(d.proj.AuthDir(), space)
	return pin, err == nil
}
