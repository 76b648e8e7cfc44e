//go:build !windows

package broker

import (
	"errors"
	"syscall"
)

// isAddrInUse reports whether err says the listen address is taken.
func isAddrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }
