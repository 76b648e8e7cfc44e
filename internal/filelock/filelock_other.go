//go:build !unix && !windows

package filelock

import (
	"errors"
	"os"
)

// errUnsupported reports a system with neither flock nor LockFileEx.
var errUnsupported = errors.New("advisory file locks are not supported on this system")

func tryLock(*os.File) (bool, error) { return false, errUnsupported }

func unlock(*os.File) error { return errUnsupported }
