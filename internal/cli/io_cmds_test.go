package cli_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// boundedFor is how long a bounded run may take before it counts as a hang: far above what
// any refusal needs on a loaded machine, far below the test's own deadline.
const boundedFor = 20 * time.Second

// cmdBounded runs cotal with a time bound and checks its exit code: a run still going
// after boundedFor is killed and fails the script as a hang. Its stdout and stderr are
// there to match after, as with exec; -stdin FILE feeds it a file of the work dir, and
// -env NAME=VALUE sets a variable for this run alone.
//
//	bounded [-stdin FILE] [-env NAME=VALUE]... CODE cotal [ARGS...]
func cmdBounded(ts *testscript.TestScript, neg bool, args []string) {
	var stdin []byte
	var env []string
	for len(args) > 1 && (args[0] == "-stdin" || args[0] == "-env") {
		if args[0] == "-stdin" {
			stdin = []byte(ts.ReadFile(args[1]))
		} else {
			env = append(env, args[1])
		}
		args = args[2:]
	}
	if neg || len(args) < 2 || args[1] != "cotal" {
		ts.Fatalf("usage: bounded [-stdin FILE] [-env NAME=VALUE]... CODE cotal [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("bounded: code %q: %v", args[0], err)
	}
	exe, err := exec.LookPath("cotal")
	if err != nil {
		ts.Fatalf("find cotal: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), boundedFor)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args[2:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = os.Environ()
	for _, k := range []string{"HOME", "COTAL_HOME", "XDG_CONFIG_HOME", "WORK", "TMPDIR"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	fmt.Fprint(ts.Stdout(), out.String())
	fmt.Fprint(ts.Stderr(), errOut.String())
	if ctx.Err() != nil {
		ts.Fatalf("cotal %s: still running after %s (a hang)\nstderr:\n%s", strings.Join(args[2:], " "), boundedFor, errOut.String())
	}
	got := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		got = exitErr.ExitCode()
	} else if err != nil {
		ts.Fatalf("cotal: %v", err)
	}
	if got != want {
		ts.Fatalf("cotal %s exited %d, want %d\nstderr:\n%s", strings.Join(args[2:], " "), got, want, errOut.String())
	}
}

// cmdLongLine writes FILE: one line of N bytes of Z, then each TEXT on a line of its own.
//
//	longline FILE N [TEXT...]
func cmdLongLine(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: longline FILE N [TEXT...]")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 {
		ts.Fatalf("longline: N %q: want a whole number", args[1])
	}
	data := append(bytes.Repeat([]byte("Z"), n), '\n')
	for _, t := range args[2:] {
		data = append(data, t+"\n"...)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), data, 0o644))
}

// cmdListing writes OUT: every entry under DIR (relative path, type and mode, and for a
// file its size and SHA-256), so two listings taken around a refused command compare
// equal when it changed nothing. A missing DIR lists as "(none)".
//
//	listing DIR OUT
func cmdListing(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: listing DIR OUT")
	}
	root := ts.MkAbs(args[0])
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %s", rel, fi.Mode())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %d %x", len(data), sha256.Sum256(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		b.Reset()
		b.WriteString("(none)\n")
	} else {
		ts.Check(err)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(b.String()), 0o644))
}
