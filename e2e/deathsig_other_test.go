//go:build !linux

package e2e

import "os/exec"

// dieWithTest does nothing: only Linux ends a child with its parent; the test's cleanup
// stops what it started.
func dieWithTest(*exec.Cmd) {}
