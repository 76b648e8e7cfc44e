package cmdutil

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// MaxPEMFile bounds a PEM file a user names (a CA, a certificate, a key): a chain of
// certificates is a few kilobytes.
const MaxPEMFile = 1 << 20

// CheckPEMFile refuses a PEM file path that is not a regular file (a folder, a device such
// as /dev/zero, a pipe) or is larger than MaxPEMFile, before anything reads it.
func CheckPEMFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (a PEM file is expected)", path)
	case fi.Size() > MaxPEMFile:
		return fmt.Errorf("%s is %d bytes, more than a PEM file holds (at most %d)", path, fi.Size(), MaxPEMFile)
	}
	return nil
}

// CAFile checks that path is a PEM file holding at least one certificate, and returns it
// as an absolute path, so a record that keeps it works from any folder.
func CAFile(path string) (string, error) {
	if err := CheckPEMFile(path); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return "", fmt.Errorf("%s holds no PEM certificate", path)
	}
	return filepath.Abs(path)
}

// CheckTLSPair checks a certificate and key given together: both or neither.
func CheckTLSPair(cert, key string) error {
	if (cert == "") != (key == "") {
		return errors.New("--tls-cert and --tls-key go together: the server certificate and its private key (PEM files)")
	}
	return nil
}
