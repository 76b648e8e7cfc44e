package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/spacehost"
	"github.com/cotal-ai/cotal/workspace"
)

// DaemonLog is the log handler of a daemon command (deliver, auth-service): text on
// stderr (see LogHandler), debug lines with $COTAL_DEBUG set.
func (f *Factory) DaemonLog() slog.Handler {
	level := slog.LevelInfo
	if f.Getenv != nil && f.Getenv("COTAL_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return LogHandler(f.IO.ErrOut, level)
}

// LogHandler is the one log handler the CLI and its daemons write through: slog's text
// format on w from level up. Log lines carry strings peers chose (names, subjects, message
// ids, errors quoting them), and this format keeps each record on one line with nothing
// raw a terminal would act on: it quotes a message, key or value that holds a control,
// bidi, format or other non-printable character or invalid UTF-8, and writes that
// character as a Go escape (\n, \x1b, \u202e). Any other handler put here must do as much
// (TestLogHandlerEscapesPeerText checks it).
func LogHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
}

// Pidfile is the pidfile a daemon writes once it serves and removes when it stops. An
// empty Path writes nothing.
type Pidfile struct {
	Path    string
	written bool
}

// Write records this process in the pidfile.
func (p *Pidfile) Write() error {
	if p.Path == "" {
		return nil
	}
	if err := workspace.WritePidfile(p.Path, os.Getpid()); err != nil {
		return fmt.Errorf("pidfile: %w", err)
	}
	p.written = true
	return nil
}

// Remove removes the pidfile if Write wrote it; a failure is reported on errOut.
func (p *Pidfile) Remove(errOut io.Writer) {
	if !p.written {
		return
	}
	if err := workspace.RemovePidfile(p.Path); err != nil {
		fmt.Fprintf(errOut, "! remove %s: %v\n", p.Path, err)
	}
}

// HostReady is the ready callback of a space-host command named what ("delivery host"):
// one line naming the spaces it serves and retries, then a warning per retried space.
func HostReady(ios *iostreams.IOStreams, what string) func(spacehost.Ready) {
	return func(r spacehost.Ready) {
		fmt.Fprintf(ios.Out, "✓ %s up (serving %s; retrying %s)\n", what, listOrNone(r.Serving), listOrNone(r.RetryingNames()))
		for _, f := range r.Retrying {
			fmt.Fprintf(ios.ErrOut, "! cannot serve space %s yet, retrying every %s: %v\n", f.Space, spacehost.DefaultRetryDelay, f.Err)
		}
	}
}

// ReloadOnHUP makes every SIGHUP reload h's manifest until ctx ends. It registers for the
// signal before it returns, so a SIGHUP sent once the host runs never kills the process.
func ReloadOnHUP(ctx context.Context, h *spacehost.Host) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				h.Reload()
			}
		}
	}()
}

// HostError turns a space host's refusal to start for want of a writable manifest folder
// into a refusal that names the fix; other errors pass through.
func HostError(what, manifest string, err error) error {
	if errors.Is(err, spacehost.ErrManifestFolder) {
		return Refuse(what+" for "+manifest, err.Error(), "give the host write access to "+filepath.Dir(manifest))
	}
	return err
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
