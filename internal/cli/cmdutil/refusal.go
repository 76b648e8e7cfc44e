// Package cmdutil holds what every command shares: the Factory of lazy dependencies,
// refusals, and how a command finds the mesh it talks to.
package cmdutil

import "fmt"

// Refusal is an error a person reads: what was refused, why, and the command to run next.
// What names the thing refused, not an action ("--out x.creds", "space \"a.b\"", never
// "finding ..."). Next is a command safe to run as printed that fixes what was refused,
// or "": it holds no placeholder, and never replaces a file or restarts a running mesh.
type Refusal struct{ What, Why, Next string }

func (r *Refusal) Error() string {
	msg := "refusing " + r.What + ": " + r.Why
	if r.Next != "" {
		msg += "\nnext: run `" + r.Next + "`"
	}
	return msg
}

// Refuse builds a Refusal.
func Refuse(what, why, next string) error { return &Refusal{What: what, Why: why, Next: next} }

// FlagError is a usage mistake; the CLI exits 2 and prints the usage hint.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }

func (e *FlagError) Unwrap() error { return e.Err }

// FlagErrorf formats a FlagError.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// RefuseUsage builds a Refusal of bad input (an argument or flag that cannot be right): it
// reads like any refusal, and the CLI exits 2 as for every usage error.
func RefuseUsage(what, why, next string) error {
	return &FlagError{Err: &Refusal{What: what, Why: why, Next: next}}
}

// NextError is a failure that names the command to run next: it reads as Err, then a
// "next: run `<Next>`" line.
type NextError struct {
	Err  error
	Next string
}

func (e *NextError) Error() string { return e.Err.Error() + "\nnext: run `" + e.Next + "`" }

func (e *NextError) Unwrap() error { return e.Err }

// WithNext adds the command to run next to err; a nil err stays nil.
func WithNext(err error, next string) error {
	if err == nil {
		return nil
	}
	return &NextError{Err: err, Next: next}
}

// StarterPrompt is the prompt of a `cotal personas new` a next line suggests: a working
// persona at once, its text edited later in the persona's file.
const StarterPrompt = "You help the team."

// ElsewhereArgs are the flags a next line repeats so it reaches the mesh the refused
// command did: " --server URL" (with --creds and --tls-ca when given) when that is not
// the project's own mesh, else "" (the project's mesh is the default).
func ElsewhereArgs(t Target) string {
	if t.OnProjectMesh() || t.Server == "" {
		return ""
	}
	s := " --server " + ShellQuote(t.Server)
	if t.Creds != "" {
		s += " --creds " + ShellQuote(t.Creds)
	}
	if t.TLSCA != "" {
		s += " --tls-ca " + ShellQuote(t.TLSCA)
	}
	return s
}
