package extension

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// FileState is what is on disk for a record.
type FileState string

// The states of a record's file.
const (
	FileOK       FileState = "ok"       // present with the recorded hash
	FileMissing  FileState = "missing"  // not on disk
	FileModified FileState = "modified" // present with another hash
)

// Check hashes rec's executable and says whether it is on disk with its recorded hash.
func (p *Prefix) Check(rec Record) (FileState, error) {
	sum, err := HashFile(p.Path(rec))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return FileMissing, nil
	case err != nil:
		return "", err
	case sum != rec.SHA256:
		return FileModified, nil
	}
	return FileOK, nil
}

// HashFile returns the lowercase hex SHA-256 of the file at path.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
