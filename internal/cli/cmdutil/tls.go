package cmdutil

import (
	"crypto/x509"
	"errors"
	"path/filepath"
)

// CAFile checks that path is a PEM file holding at least one certificate, and returns it
// as an absolute path, so a record that keeps it works from any folder. Its errors are
// usage errors that name --tls-ca.
func CAFile(path string) (string, error) {
	b, err := UserFile{Flag: "--tls-ca", Path: path, Kind: "a PEM file of CA certificates", Max: MaxCAFileSize}.Read()
	if err != nil {
		return "", err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return "", FlagErrorf("--tls-ca %s holds no PEM certificate: give the CA file (PEM) that signed the mesh's TLS certificate", path)
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
