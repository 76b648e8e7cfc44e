//go:build !linux

package up

// selfExe is the path the broker process re-executes for its background child and its
// daemons: the binary's path, which must still exist when a daemon (re)starts (a binary
// that `go run` deleted cannot be run again; see docs/operations.md).
func selfExe(executable func() (string, error)) (string, error) { return executable() }
