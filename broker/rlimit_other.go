//go:build !unix

package broker

// raiseOpenFiles reports the open-file limit as unknown where there is no RLIMIT_NOFILE.
func raiseOpenFiles() (soft, hard uint64, err error) { return 0, 0, nil }

// openFileLimit reports the open-file limit as unknown where there is no RLIMIT_NOFILE.
func openFileLimit() (soft, hard uint64, err error) { return 0, 0, nil }
