package down

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	backupcmd "github.com/cotal-ai/cotal/internal/cli/backup"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/workspace"
)

// BackupsDir is where cotal down --preserve-state writes its cuts, inside .cotal/.
const BackupsDir = "backups"

// preserve cuts a backup of every space of the running mesh into
// .cotal/backups/<UTC time>.cotal-backup (folder 0700, file 0600), after its daemons
// stopped and before the broker stops, and says where. A cut that fails stops cotal down
// with the broker still running.
func preserve(ctx context.Context, opts *Options, proj *workspace.Project) error {
	if !cmdutil.MeshRunning(proj) {
		return cmdutil.Refuse("--preserve-state", "no mesh runs for "+proj.Root+", and a cut is taken from a running broker; its store is kept as it is",
			"cotal up --detach && cotal down --preserve-state")
	}
	dir := filepath.Join(proj.Dir(), BackupsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("preserve state: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("preserve state: %w", err)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	path := filepath.Join(dir, now().UTC().Format("20060102T150405.000Z")+".cotal-backup")
	m, err := backupcmd.Cut{Project: proj, Path: path, Now: now}.Write(ctx)
	if err != nil {
		return fmt.Errorf("preserve state (the broker still runs; its daemons stopped, cotal up starts them again): %w", err)
	}
	fmt.Fprintf(opts.IO.Out, "✓ preserved the state of %s in %s\n", m.Summary(), path)
	fmt.Fprintf(opts.IO.Out, "  restore it with: cotal up --restore %s (into a fresh store)\n", cmdutil.ShellQuote(path))
	return nil
}
