//go:build !unix

package cmdutil

import "os"

// parentPipe is nil where the pipe cannot be polled: WithParent then reports the variable
// as unusable rather than leave a read no Close could end.
func parentPipe(int) *os.File { return nil }
