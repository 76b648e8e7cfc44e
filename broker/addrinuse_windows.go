//go:build windows

package broker

import (
	"errors"
	"syscall"
)

// wsaeaddrinuse is WSAEADDRINUSE, what Winsock reports for a taken address.
const wsaeaddrinuse = syscall.Errno(10048)

// isAddrInUse reports whether err says the listen address is taken.
func isAddrInUse(err error) bool {
	return errors.Is(err, wsaeaddrinuse) || errors.Is(err, syscall.EADDRINUSE)
}
