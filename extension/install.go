package extension

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// Errors Install and Remove return; match them with errors.Is.
var (
	ErrExists       = errors.New("extension already installed")
	ErrNotInstalled = errors.New("extension not installed")
	ErrReserved     = errors.New("extension name is a built-in command")
	ErrNoGo         = errors.New("the go command is not available")
	ErrNoVersion    = errors.New("extension does not answer --version")
)

// versionTimeout bounds `cotal-<name> --version`.
const versionTimeout = 10 * time.Second

// InstallRequest says what Install installs.
type InstallRequest struct {
	Spec       string                 // local path or module path@version
	Wd         string                 // folder a relative path is read against; "" means the current one
	Name       string                 // "" means from the file name, cotal-<name>
	FirstParty bool                   // mark a local file first-party (module specs: see the package comment)
	Replace    bool                   // replace an installed extension of the same name
	Reserved   func(name string) bool // names that may not be used; nil means none
}

// Install installs an extension under the held lock g and returns its record. It stages
// the executable under a temp name, asks it --version, renames it into the store and then
// commits the new lock atomically; on any error the lock is unchanged and the staged file
// is removed.
func (p *Prefix) Install(ctx context.Context, g *Guard, req InstallRequest) (Record, error) {
	if err := p.owns(g); err != nil {
		return Record{}, err
	}
	wd := req.Wd
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return Record{}, fmt.Errorf("install %s: current folder: %w", req.Spec, err)
		}
	}
	spec, err := ParseSpec(req.Spec, wd)
	if err != nil {
		return Record{}, fmt.Errorf("install: %w", err)
	}
	firstParty := req.FirstParty
	if spec.IsModule() {
		official := strings.HasPrefix(spec.Module, FirstPartyModulePrefix)
		if req.FirstParty && !official {
			return Record{}, fmt.Errorf("install %s: --first-party: a module is first-party only under %s", spec, FirstPartyModulePrefix)
		}
		firstParty = official
	}
	name := req.Name
	if name == "" {
		if name, err = NameFromFile(spec.BinaryName()); err != nil {
			return Record{}, fmt.Errorf("install %s: %w", spec, err)
		}
	} else if err := ValidName(name); err != nil {
		return Record{}, fmt.Errorf("install %s: %w", spec, err)
	}
	if req.Reserved != nil && req.Reserved(name) {
		return Record{}, fmt.Errorf("install %s: %w: cotal %s", spec, ErrReserved, name)
	}
	lf, err := p.ReadLockfile()
	if err != nil {
		return Record{}, err
	}
	if old, ok := lf.Find(name); ok && !req.Replace {
		return Record{}, fmt.Errorf("install %s: %w: %s %s from %s", spec, ErrExists, name, old.Version, old.Spec)
	}
	if err := p.sweep(lf); err != nil {
		return Record{}, err
	}
	src := spec.File
	if spec.IsModule() {
		bin, cleanup, err := p.goInstall(ctx, spec)
		if err != nil {
			return Record{}, fmt.Errorf("install %s: %w", spec, err)
		}
		defer cleanup()
		src = bin
	}
	rec, err := p.place(ctx, src, name)
	if err != nil {
		return Record{}, fmt.Errorf("install %s: %w", spec, err)
	}
	rec.Spec, rec.FirstParty = spec.String(), firstParty
	lf.put(rec)
	if err := p.writeLockfile(g, lf); err != nil {
		return Record{}, fmt.Errorf("install %s: %w", spec, err)
	}
	p.logger().Debug("extension installed", "name", name, "version", rec.Version, "spec", rec.Spec)
	if err := p.sweep(lf); err != nil {
		return rec, fmt.Errorf("install %s: installed, but %w", spec, err)
	}
	return rec, nil
}

// place copies the executable src into the store under its hash and asks it --version.
// It returns a record with Name, Version, SHA256, File and InstalledAt set.
func (p *Prefix) place(ctx context.Context, src, name string) (rec Record, err error) {
	fi, err := os.Stat(src)
	if err != nil {
		return Record{}, err
	}
	if !fi.Mode().IsRegular() {
		return Record{}, fmt.Errorf("%s is not a regular file", src)
	}
	in, err := os.Open(src)
	if err != nil {
		return Record{}, err
	}
	defer in.Close()
	store := filepath.Join(p.Dir, StoreDir)
	if err := os.MkdirAll(store, 0o700); err != nil {
		return Record{}, fmt.Errorf("store: %w", err)
	}
	tmp, err := os.CreateTemp(store, tempPrefix+"*")
	if err != nil {
		return Record{}, fmt.Errorf("stage: %w", err)
	}
	staged := tmp.Name()
	defer func() {
		if err != nil {
			_ = tmp.Close() // already failing
			if rmErr := os.Remove(staged); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("remove staged file: %w", rmErr))
			}
		}
	}()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), in); err != nil {
		return Record{}, fmt.Errorf("stage %s: %w", src, err)
	}
	if err := tmp.Chmod(0o700); err != nil {
		return Record{}, fmt.Errorf("stage: set mode: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return Record{}, fmt.Errorf("stage: sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Record{}, fmt.Errorf("stage: close: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	version, err := p.AskVersion(ctx, staged)
	if err != nil {
		return Record{}, err
	}
	rel := path.Join(StoreDir, sum, ExecPrefix+name)
	final := filepath.Join(p.Dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return Record{}, fmt.Errorf("store: %w", err)
	}
	if err := os.Rename(staged, final); err != nil {
		return Record{}, fmt.Errorf("store: rename staged file: %w", err)
	}
	for _, d := range []string{filepath.Dir(final), store} {
		if err := atomicfile.SyncDir(d); err != nil {
			return Record{}, fmt.Errorf("store: sync %s: %w", d, err)
		}
	}
	return Record{Name: name, Version: version, SHA256: sum, File: rel, InstalledAt: time.Now().UTC().Truncate(time.Second)}, nil
}

// AskVersion runs `exe --version` and returns its version: the last word of the first
// line it prints ("cotal-hello 1.2.3" and "1.2.3" both give 1.2.3). An executable that
// fails, prints nothing or runs past 10 s gives an error wrapping ErrNoVersion.
func (p *Prefix) AskVersion(ctx context.Context, exe string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	var err error
	for attempt := 1; ; attempt++ {
		out.Reset()
		errOut.Reset()
		cmd := exec.CommandContext(ctx, exe, "--version")
		cmd.Env = p.env()
		cmd.Stdout, cmd.Stderr = &out, &errOut
		cmd.WaitDelay = time.Second
		err = cmd.Run()
		// ETXTBSY: a fork in another goroutine still held the staged file open for
		// writing when it exec'd (Go issue 22315); it closes on that child's exec.
		if !errors.Is(err, syscall.ETXTBSY) || attempt == 5 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
	}
	if err != nil {
		msg := strings.TrimSpace(errOut.String())
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		if msg != "" {
			return "", fmt.Errorf("%w: %w: %s", ErrNoVersion, err, msg)
		}
		return "", fmt.Errorf("%w: %w", ErrNoVersion, err)
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	fields := strings.Fields(first)
	if len(fields) == 0 {
		return "", fmt.Errorf("%w: it printed no version line", ErrNoVersion)
	}
	return fields[len(fields)-1], nil
}

// goInstall builds a module spec with `go install` into a temp GOBIN inside the prefix and
// returns the built file and a func that removes the temp folder.
func (p *Prefix) goInstall(ctx context.Context, spec Spec) (string, func(), error) {
	goCmd := p.GoCmd
	if goCmd == "" {
		goCmd = "go"
	}
	goPath, err := exec.LookPath(goCmd)
	if err != nil {
		return "", nil, fmt.Errorf("%w (%w): install Go (https://go.dev/dl) or give a local path to a built cotal-<name>", ErrNoGo, err)
	}
	gobin, err := os.MkdirTemp(p.Dir, tempPrefix+"gobin-*")
	if err != nil {
		return "", nil, fmt.Errorf("temp GOBIN: %w", err)
	}
	cleanup := func() {
		if err := os.RemoveAll(gobin); err != nil {
			p.logger().Warn("remove temp GOBIN", "dir", gobin, "err", err)
		}
	}
	cmd := exec.CommandContext(ctx, goPath, "install", spec.String())
	cmd.Env = append(p.env(), "GOBIN="+gobin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go install: %w: %s", err, strings.TrimSpace(out.String()))
	}
	bin := filepath.Join(gobin, spec.BinaryName())
	if _, err := os.Stat(bin); err != nil {
		if alt := bin + ".exe"; fileExists(alt) {
			return alt, cleanup, nil
		}
		cleanup()
		return "", nil, fmt.Errorf("go install built no %s: %w", spec.BinaryName(), err)
	}
	return bin, cleanup, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Remove uninstalls the extension name under the held lock g and returns its record. The
// new lock is committed before the file is removed.
func (p *Prefix) Remove(g *Guard, name string) (Record, error) {
	if err := p.owns(g); err != nil {
		return Record{}, err
	}
	lf, err := p.ReadLockfile()
	if err != nil {
		return Record{}, err
	}
	rec, ok := lf.Find(name)
	if !ok {
		return Record{}, fmt.Errorf("remove %s: %w", name, ErrNotInstalled)
	}
	lf.remove(name)
	if err := p.writeLockfile(g, lf); err != nil {
		return Record{}, fmt.Errorf("remove %s: %w", name, err)
	}
	if err := p.sweep(lf); err != nil {
		return rec, fmt.Errorf("remove %s: removed from the lock, but %w", name, err)
	}
	return rec, nil
}

// Sweep removes, under the held lock g, what a crash or an earlier change left behind:
// temp files and folders, and store files the lock does not name.
func (p *Prefix) Sweep(g *Guard) error {
	if err := p.owns(g); err != nil {
		return err
	}
	lf, err := p.ReadLockfile()
	if err != nil {
		return err
	}
	return p.sweep(lf)
}

// sweep removes leftovers not named by lf; the caller holds the lock.
func (p *Prefix) sweep(lf *Lockfile) error {
	keep := map[string]bool{}
	for _, r := range lf.Extensions {
		keep[r.File] = true
	}
	var errs []error
	remove := func(full string) {
		if err := os.RemoveAll(full); err != nil {
			errs = append(errs, err)
		} else {
			p.logger().Debug("swept", "path", full)
		}
	}
	top, err := os.ReadDir(p.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sweep extensions prefix: %w", err)
	}
	for _, e := range top {
		// tempPrefix: staged GOBINs; "."+LockfileName+".tmp-": atomicfile.WriteFile's temp file.
		if strings.HasPrefix(e.Name(), tempPrefix) || strings.HasPrefix(e.Name(), "."+LockfileName+".tmp-") {
			remove(filepath.Join(p.Dir, e.Name()))
		}
	}
	store := filepath.Join(p.Dir, StoreDir)
	sums, err := os.ReadDir(store)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sweep extensions store: %w", err)
	}
	for _, s := range sums {
		dir := filepath.Join(store, s.Name())
		if !s.IsDir() {
			remove(dir)
			continue
		}
		files, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		kept := 0
		for _, f := range files {
			if keep[path.Join(StoreDir, s.Name(), f.Name())] {
				kept++
				continue
			}
			remove(filepath.Join(dir, f.Name()))
		}
		if kept == 0 {
			remove(dir)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sweep extensions prefix: %w", errors.Join(errs...))
	}
	return nil
}
