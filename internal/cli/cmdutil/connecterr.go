package cmdutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/protocol"
)

// A failed connect names the command that fixes it only when one exists that is safe to
// run as printed: it never restarts a mesh that runs, never replaces a file, and holds no
// placeholder. Otherwise the error says what to check, and no next line is printed.

// credsError is a --creds file that cannot be read or is not a creds file. In a project
// whose mesh serves t's space, the next command mints a good credential to a new file;
// the file given is never replaced.
func credsError(t Target, err error) error {
	return withFreshMint(t, fmt.Errorf("%w: give the creds file the mesh's operator minted for you", err))
}

// withFreshMint adds to err, when the project's own mesh is the target, the mint of a
// credential for the name the --creds file stands for into a file that does not exist yet.
func withFreshMint(t Target, err error) error {
	if t.Project == nil || t.Remote != nil || !t.OnProjectMesh() {
		return err
	}
	stem := strings.TrimSuffix(filepath.Base(t.Creds), filepath.Ext(t.Creds))
	if !protocol.ValidActor(stem) {
		return err
	}
	for _, out := range []string{stem + ".creds", stem + "-" + t.Space + ".creds"} {
		if _, serr := os.Lstat(out); errors.Is(serr, fs.ErrNotExist) {
			return WithNext(err, "cotal mint "+stem+" --profile agent --space "+t.Space+" --out "+ShellQuote(out))
		}
	}
	return err
}

// maxCAFile bounds a --tls-ca file: a CA bundle is a few certificates of a few KiB each.
const maxCAFile = 1 << 20

// checkTLSCA refuses a CA file the connect would read that is not a regular file of a
// CA's size (a folder, a device such as /dev/zero, a path that cannot be read), before
// the connect reads it whole.
func checkTLSCA(path string) error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("--tls-ca %s: %w: give the CA file (PEM) that signed the mesh's TLS certificate", path, errors.Unwrap(err))
	case !fi.Mode().IsRegular():
		return fmt.Errorf("--tls-ca %s: not a regular file (%s): give the CA file (PEM) that signed the mesh's TLS certificate", path, fileKind(fi))
	case fi.Size() > maxCAFile:
		return fmt.Errorf("--tls-ca %s: %d bytes, over the %d-byte limit of a CA file", path, fi.Size(), maxCAFile)
	}
	return nil
}

// fileKind names what a path that is not a regular file is.
func fileKind(fi os.FileInfo) string {
	switch m := fi.Mode(); {
	case m.IsDir():
		return "a folder"
	case m&os.ModeCharDevice != 0, m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a plain file"
}

// connectError adds to a failed connect to t what fixes it: a fresh credential when the
// broker turned the one given away, a (re)started mesh when the project's own mesh did not
// answer. Other errors pass as they are.
func connectError(t Target, err error) error {
	var pe *fs.PathError
	switch {
	case t.TLSCA != "" && errors.As(err, &pe):
		return fmt.Errorf("--tls-ca %s: %w: give the CA file (PEM) that signed the mesh's TLS certificate", t.TLSCA, pe.Err)
	case t.TLSCA != "" && (strings.Contains(err.Error(), "rootCA file") || strings.Contains(err.Error(), "parse root certificate")):
		return fmt.Errorf("--tls-ca %s: not a CA certificate file (PEM): %w", t.TLSCA, err)
	case refusedAuth(err):
		switch {
		case t.Creds != "":
			return withFreshMint(t, fmt.Errorf("%w: the broker does not accept the credential in %s (minted for another mesh or space, expired or revoked)", err, t.Creds))
		case t.Remote != nil:
			return WithNext(err, "cotal login --idp "+t.Remote.IdPIssuer)
		case t.Project != nil && !t.OnProjectMesh():
			return fmt.Errorf("%w: %s is not the mesh of %s, so this project's keys do not sign in there: give --creds of that mesh, or leave --server out", err, t.Server, t.Project.Root)
		case t.Project != nil && MeshRunning(t.Project):
			// The project's own mesh turned its keys away: it runs a trust chain the
			// project no longer holds. A restart would fix it, but stops every peer: the
			// person decides, so there is no next line.
			return fmt.Errorf("%w: the mesh of %s runs with another trust chain than its .cotal/auth; restarting it (cotal down, then cotal up --detach) loads the one it holds now", err, t.Project.Root)
		case t.Project != nil:
			return fmt.Errorf("%w: another broker answers at %s, not the mesh of %s", err, t.Server, t.Project.Root)
		}
	case untrustedTLS(err):
		why := "the server's TLS certificate is not signed by a CA this machine trusts: give --tls-ca with the CA file (PEM) of the mesh's certificate"
		if t.TLSCA != "" {
			why = "the server's TLS certificate is not signed by the CA in " + t.TLSCA + ": give --tls-ca with the CA file (PEM) of the mesh's certificate"
		}
		return fmt.Errorf("%w: %s", err, why)
	case unreachable(err):
		if bad := badPort(t.Server); bad != "" {
			return fmt.Errorf("%w: %s", err, bad)
		}
		switch {
		case t.Remote != nil:
			return WithNext(err, "cotal meshes add "+t.Space+" --from "+t.Remote.ExchangeURL+" --force")
		case t.Project != nil && t.OnProjectMesh() && !MeshRunning(t.Project):
			return WithNext(fmt.Errorf("%w: the mesh of %s is not running", err, t.Project.Root), "cotal up --detach")
		case t.Project != nil && t.OnProjectMesh():
			return fmt.Errorf("%w: the mesh of %s runs (pid file %s) but did not answer; see %s", err, t.Project.Root, t.Project.PidFile(), t.Project.LogFile())
		case t.Project == nil && loopback(t.Server) && !privileged(t.Server):
			return WithNext(fmt.Errorf("%w: no mesh runs there", err), "cotal up --detach --server "+t.Server)
		default:
			return fmt.Errorf("%w: check the address, and that a mesh runs there", err)
		}
	}
	return err
}

// badPort says what is wrong with the port of each URL of server, or "".
func badPort(server string) string {
	for _, raw := range strings.Split(server, ",") {
		u, err := url.Parse(raw)
		if err != nil || u.Port() == "" {
			continue
		}
		if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("port %s of %s is not a port: give one from 1 to 65535", u.Port(), raw)
		}
	}
	return ""
}

// privileged reports whether server's port is below 1024, where cotal up as a user
// cannot listen.
func privileged(server string) bool {
	u, err := url.Parse(server)
	if err != nil {
		return true
	}
	n, err := strconv.Atoi(u.Port())
	return err != nil || n < 1024
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

// loopback reports whether server is one URL of this machine.
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
