package selfupdate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/extension"
)

// Child reinstalls extensions in isolated child processes: `<Exe> ext add --reinstall
// --name <n> [--first-party] -- <spec>`, each borrowing the parent's prefix lock through
// an inherited file descriptor (extension.LockFDEnv), so no other change can slip in between.
type Child struct {
	Exe string   // the cotal binary; required
	Env []string // the child's environment; nil means os.Environ()
}

// Reinstall runs one child; its output is returned in the error when it fails.
func (c Child) Reinstall(ctx context.Context, g *extension.Guard, rec extension.Record, spec string) error {
	args := []string{"ext", "add", "--reinstall", "--name", rec.Name}
	if rec.FirstParty {
		args = append(args, "--first-party")
	}
	args = append(args, "--", spec)
	cmd := exec.CommandContext(ctx, c.Exe, args...)
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string(nil), env...), extension.LockFDEnv+"=3") // ExtraFiles[0] is fd 3
	cmd.ExtraFiles = []*os.File{g.File()}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			return fmt.Errorf("reinstall child: %w", err)
		}
		return fmt.Errorf("reinstall child: %w: %s", err, msg)
	}
	return nil
}
