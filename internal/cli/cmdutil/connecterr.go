package cmdutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	"github.com/nats-io/nats.go"
)

// credsError is a --creds file that cannot be read or is not a creds file, with the mint
// command that writes a good one there.
func credsError(path string, err error) error {
	next := "cotal mint <name> --profile agent --out " + ShellQuote(path)
	if !errors.Is(err, os.ErrNotExist) {
		next += " --force"
	}
	return WithNext(err, next)
}

// connectError adds to a failed connect to t the command most likely to fix it: a fresh
// credential when the broker turned the one given away, a (re)started mesh when no server
// answered. Other errors pass as they are.
func connectError(t Target, err error) error {
	switch {
	case refusedAuth(err):
		switch {
		case t.Creds != "":
			return credsError(t.Creds, err)
		case t.Remote != nil:
			return WithNext(err, "cotal login --idp "+t.Remote.IdPIssuer)
		case t.Project != nil:
			// The project's own keys were turned away: the broker runs another trust chain.
			return WithNext(err, "cotal down && cotal up --detach")
		}
	case untrustedTLS(err):
		why := errors.New("the server's TLS certificate is not signed by a CA this machine trusts")
		if t.TLSCA != "" {
			why = errors.New("the server's TLS certificate is not signed by the CA in " + t.TLSCA)
		}
		return WithNext(fmt.Errorf("%w: %w", err, why), "cotal <command> --tls-ca <the CA file (PEM) of the mesh's certificate>")
	case unreachable(err):
		switch {
		case t.Remote != nil:
			return WithNext(err, "cotal meshes add "+t.Space+" --from "+t.Remote.ExchangeURL+" --force")
		case t.Project != nil && t.OnProjectMesh():
			return WithNext(err, "cotal down && cotal up --detach")
		case loopback(t.Server):
			return WithNext(err, "cotal up --detach --server "+t.Server)
		default:
			return WithNext(err, "cotal status --server <a reachable nats:// URL> --space "+t.Space)
		}
	}
	return err
}

// refusedAuth reports whether err says the broker turned the credential away.
func refusedAuth(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked)
}

// untrustedTLS reports whether err says the server's TLS certificate could not be checked.
func untrustedTLS(err error) bool {
	var ua x509.UnknownAuthorityError
	var cv *tls.CertificateVerificationError
	var hn x509.HostnameError
	return errors.As(err, &ua) || errors.As(err, &cv) || errors.As(err, &hn)
}

// unreachable reports whether err says no server answered.
func unreachable(err error) bool {
	var netErr net.Error
	return errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr)
}

// loopback reports whether server is a URL of this machine.
func loopback(server string) bool {
	u, err := url.Parse(server)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}
