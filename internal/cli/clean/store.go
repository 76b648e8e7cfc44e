package clean

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/workspace"
)

// StoreReport is what `cotal clean store --json` and `cotal clean all --json` print.
type StoreReport struct {
	DryRun  bool     `json:"dryRun"`
	Deleted bool     `json:"deleted"` // false on a dry run, or when there was nothing
	Store   string   `json:"store"`   // the store folder
	Streams []string `json:"streams"` // streams in the store, KV buckets as KV_<bucket>
	Bytes   int64    `json:"bytes"`   // the store's size
	// Paths are the other folders and files `clean all` deletes (the project's keys and
	// auth state).
	Paths []string `json:"paths,omitempty"`
}

// jetStreamDir is the folder the embedded broker writes under its store folder.
const jetStreamDir = "jetstream"

func runStore(_ context.Context, opts *Options, all bool) error {
	proj, err := opts.Project()
	if err != nil {
		return err
	}
	if running := liveDaemons(proj); len(running) > 0 {
		return cmdutil.Refuse(fmt.Sprintf("to delete the store of %s", proj.Root),
			"the mesh of this project is running ("+strings.Join(running, ", ")+") and holds its store open; stop it first",
			"cotal down")
	}
	store := opts.StoreDir
	if store == "" {
		store = proj.StoreDir()
	}
	if store, err = filepath.Abs(store); err != nil {
		return fmt.Errorf("store %s: %w", opts.StoreDir, err)
	}
	rep := StoreReport{DryRun: opts.DryRun, Store: store, Streams: []string{}}
	if err := scanStore(store, opts.StoreDir != "", &rep); err != nil {
		return err
	}
	if all {
		if _, err := os.Stat(proj.AuthDir()); err == nil {
			rep.Paths = append(rep.Paths, proj.AuthDir())
		}
	}
	if opts.DryRun || (rep.Bytes == 0 && len(rep.Streams) == 0 && len(rep.Paths) == 0) {
		return opts.showStore(rep, all)
	}
	what := "the store " + store + " (" + cmdutil.Count(len(rep.Streams), "stream") + ", " + size(rep.Bytes) + ")"
	if len(rep.Paths) > 0 {
		what += " and the project's keys " + strings.Join(rep.Paths, ", ")
	}
	if err := opts.confirm(what); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(store, jetStreamDir)); err != nil {
		return fmt.Errorf("delete store %s: %w", store, err)
	}
	if err := os.Remove(store); err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotEmpty(err) {
		return fmt.Errorf("delete store %s: %w", store, err)
	}
	for _, p := range rep.Paths {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("delete %s: %w", p, err)
		}
	}
	rep.Deleted = true
	return opts.showStore(rep, all)
}

// liveDaemons names the project's processes that still run: the broker (nats.pid) and
// any daemon whose pidfile in .cotal/ pins a live process.
func liveDaemons(proj *workspace.Project) []string {
	var out []string
	pids, _ := filepath.Glob(filepath.Join(proj.Dir(), "*.pid"))
	slices.Sort(pids)
	for _, p := range pids {
		rec, err := workspace.ReadPidfile(p)
		if err != nil {
			continue
		}
		if alive, err := rec.Alive(); err == nil && alive {
			name, _, _ := strings.Cut(filepath.Base(p), ".") // nats.pid, delivery.<space key>.pid
			if name == "nats" {
				name = "broker"
			}
			out = append(out, fmt.Sprintf("%s pid %d", name, rec.PID))
		}
	}
	return out
}

// scanStore fills rep with the streams and size of the store at dir. A missing folder is
// an empty store; a folder named with --store-dir (named) that holds something but no
// JetStream store is refused, so no other folder is ever deleted.
func scanStore(dir string, named bool, rep *StoreReport) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store %s: %w", dir, err)
	}
	js := filepath.Join(dir, jetStreamDir)
	if fi, err := os.Stat(js); err != nil || !fi.IsDir() {
		if len(entries) == 0 {
			return nil
		}
		what := "the store folder"
		if named {
			what = "--store-dir"
		}
		return cmdutil.RefuseUsage(what+" "+dir, "it holds no JetStream store (no "+jetStreamDir+"/ folder): name the folder cotal up --store-dir was given", "")
	}
	streams, err := filepath.Glob(filepath.Join(js, "*", "streams", "*"))
	if err != nil {
		return fmt.Errorf("store %s: %w", dir, err)
	}
	for _, s := range streams {
		rep.Streams = append(rep.Streams, filepath.Base(s))
	}
	slices.Sort(rep.Streams)
	return filepath.WalkDir(js, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("store %s: %w", dir, err)
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				rep.Bytes += fi.Size()
			}
		}
		return nil
	})
}

func (o *Options) showStore(rep StoreReport, all bool) error {
	if o.JSON {
		return cmdutil.WriteJSON(o.IO.Out, rep)
	}
	out := o.IO.Out
	if len(rep.Streams) == 0 && rep.Bytes == 0 && len(rep.Paths) == 0 {
		fmt.Fprintf(out, "nothing to delete: no store at %s\n", rep.Store)
		return nil
	}
	verb := "deleted"
	if rep.DryRun {
		verb = "would delete"
	}
	streams, buckets := 0, 0
	for _, s := range rep.Streams {
		if strings.HasPrefix(s, "KV_") {
			buckets++
		} else {
			streams++
		}
	}
	fmt.Fprintf(out, "%s the store %s: %s, %s, %s\n", verb, rep.Store,
		cmdutil.Count(streams, "stream"), cmdutil.Count(buckets, "KV bucket"), size(rep.Bytes))
	if rep.DryRun {
		for _, s := range rep.Streams {
			fmt.Fprintf(out, "  %s\n", s)
		}
	}
	for _, p := range rep.Paths {
		fmt.Fprintf(out, "%s the project's keys and auth state %s\n", verb, p)
	}
	switch {
	case rep.DryRun:
		fmt.Fprintln(out, "dry run: nothing was deleted")
	case all:
		fmt.Fprintln(out, "✓ cleaned: the next cotal up makes new keys and starts every space empty")
	default:
		fmt.Fprintln(out, "✓ cleaned: the next cotal up starts every space empty, with the same keys")
	}
	return nil
}

// size writes n bytes as a person reads them: 512 B, 1.5 KiB, 3.2 MiB.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}

// isNotEmpty reports a Remove of a folder that still holds something (left in place).
func isNotEmpty(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && (errors.Is(pe.Err, fs.ErrExist) || strings.Contains(pe.Err.Error(), "not empty"))
}
