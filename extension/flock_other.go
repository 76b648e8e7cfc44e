//go:build !unix

package extension

import (
	"errors"
	"os"
)

// errNoFlock reports a system without flock; extensions are not supported there yet.
var errNoFlock = errors.New("advisory file locks are not supported on this system")

func tryLockFile(*os.File) (bool, error) { return false, errNoFlock }

func unlockFile(*os.File) error { return errNoFlock }
