package up

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/launch"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/workspace"
)

// detach re-runs `cotal up` in the background with its output in the project's log, and
// returns once the child reports that it serves (or says why it did not).
func detach(ctx context.Context, opts *Options, proj *workspace.Project, space string) error {
	logf, err := os.OpenFile(proj.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	start := logSize(logf) // this run's lines begin here

	args := []string{"up", "--space", space}
	if opts.NoManager {
		args = append(args, "--no-manager")
	}
	if opts.Open {
		args = append(args, "--open")
	}
	if opts.Server != "" {
		args = append(args, "--server", opts.Server)
	}
	if opts.File != "" {
		abs, err := filepath.Abs(opts.File)
		if err != nil {
			return fmt.Errorf("-f %s: %w", opts.File, err)
		}
		args = append(args, "--file", abs)
	}
	if opts.StoreDir != "" {
		args = append(args, "--store-dir", opts.StoreDir)
	}
	if opts.External != "" {
		args = append(args, "--external", opts.External)
	}
	args = append(args, opts.clusterArgs()...)
	args = append(args, opts.limitArgs()...)
	args = append(args, opts.restoreArgs()...)
	for _, f := range []struct{ flag, v string }{{"--tls-cert", opts.TLSCert}, {"--tls-key", opts.TLSKey}, {"--tls-ca", opts.TLSCA}} {
		if f.v != "" {
			args = append(args, f.flag, f.v)
		}
	}
	if opts.ClusterTLS {
		args = append(args, "--cluster-tls")
	}
	if opts.InsecureNoTLS {
		args = append(args, "--insecure-no-tls")
	}
	if opts.Replicas != 0 {
		args = append(args, "--replicas", strconv.Itoa(opts.Replicas))
	}
	cmd, err := launch.Command(opts.Executable, args...)
	if err != nil {
		return err
	}
	cmd.Dir = proj.Root
	cmd.Stdout, cmd.Stderr = logf, logf
	child, err := launch.Start(cmd, launch.Options{Session: true})
	if err != nil {
		return fmt.Errorf("start background broker: %w", err)
	}
	// "ready <client URL> <bound host:port>[ <node name> <route host:port>]"; an interrupt
	// before it stops the child: undo the start.
	rest, err := child.Ready(ctx, daemonStopWait)
	switch {
	case errors.Is(err, launch.ErrNotReady):
		what := "the background broker"
		if opts.External != "" {
			what = "the background supervisor of the external broker" // --external starts no broker
		}
		return fmt.Errorf("%s did not start (%v):\n%s", what, child.Err(), tail(proj.LogFile(), start))
	case err != nil:
		return err
	}
	f := append(strings.Fields(rest), "", "", "", "")
	url, listen := f[0], f[1]
	what := modeName(opts.mode())
	if !opts.Open {
		what += ", delivery up" // the child reports ready only once its daemons serve
	}
	_, pinErr := authsvc.ReadPin(proj.AuthDir(), space)
	if pinErr == nil && !opts.Open {
		what += ", auth service up" // a user-auth space's, which the child also waited for
	}
	if pinErr != nil && !opts.Open && !opts.NoManager {
		what += ", manager up"
	}
	if opts.External != "" {
		what += ", external broker"
	}
	if f[2] != "" {
		what += fmt.Sprintf(", cluster %s node %s routes on %s", opts.ClusterName, f[2], f[3])
	}
	opts.served = true
	fmt.Fprintf(opts.IO.Out, "✓ cotal up: %s (space %s, %s) running in the background, pid %d\n", readyAddr(url, listen), space, what, child.Process.Pid)
	warnings(opts.IO.ErrOut, proj.LogFile(), start)
	fmt.Fprintf(opts.IO.ErrOut, "log: %s; stop it with `%s down`\n", proj.LogFile(), cmdutil.SelfCommand(opts.Executable))
	return nil
}

// warnings repeats on w the "! ..." lines the background broker wrote to its log at path
// since offset start before it was ready (a persona skipped, a stream note), which the
// person starting it would otherwise never see; at most 64 KiB of the log is read.
func warnings(w io.Writer, path string, start int64) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return
	}
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "! ") {
			fmt.Fprintln(w, termsafe.Escape(line))
		}
	}
}

// logSize is the size of the log f appends to: where the lines of a run starting now begin.
func logSize(f *os.File) int64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	return fi.Size()
}

// tail returns the last lines a run wrote to a log from offset start on, for an error
// message: never the lines of earlier runs.
func tail(path string, start int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if start > 0 && start <= int64(len(b)) {
		b = b[start:]
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
