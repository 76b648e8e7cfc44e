// Package iostreams is the only way commands reach the terminal: results to Out,
// progress and hints to ErrOut, input from In.
package iostreams

import (
	"bytes"
	"io"
	"os"

	"github.com/charmbracelet/x/term"
)

// IOStreams holds a command's standard streams and whether they are terminals.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY  bool
	stdoutTTY bool
	stderrTTY bool
}

// System returns the process's streams, detecting terminals once.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		stdinTTY: isTerminal(os.Stdin), stdoutTTY: isTerminal(os.Stdout), stderrTTY: isTerminal(os.Stderr),
	}
}

// Test returns streams backed by buffers and no terminals: in, out, errOut.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdinTTY reports whether input comes from a terminal.
func (s *IOStreams) IsStdinTTY() bool { return s.stdinTTY }

// IsStdoutTTY reports whether results go to a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether diagnostics go to a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// SetStdoutTTY overrides terminal detection for results (tests).
func (s *IOStreams) SetStdoutTTY(v bool) { s.stdoutTTY = v }

// isTerminal reports whether f is a terminal: a character device alone is not one
// (/dev/null is a character device, and a command reading it must not prompt).
func isTerminal(f *os.File) bool {
	return term.IsTerminal(f.Fd())
}
