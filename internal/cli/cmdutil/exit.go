package cmdutil

import "strconv"

// ExitError carries the exit code of a program cotal ran in its place (an extension): the
// program already said what it had to, so cli.Main exits with Code and prints nothing.
type ExitError struct{ Code int }

// Error reads "exit status <code>".
func (e *ExitError) Error() string { return "exit status " + strconv.Itoa(e.Code) }
