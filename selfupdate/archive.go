package selfupdate

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrChecksum reports a release file whose SHA-256 is not the one its SHA256SUMS lists, or
// that SHA256SUMS does not list.
var ErrChecksum = errors.New("checksum mismatch")

// maxBinary bounds the binary read out of a release archive (cotal is tens of MB).
const maxBinary = 512 << 20

// maxSums bounds a SHA256SUMS file.
const maxSums = 1 << 20

// VerifyChecksum checks file against sums, a SHA256SUMS file as scripts/release writes it
// (and sha256sum prints): one "<64 hex>  <name>" line per release file. The line of file's
// base name must exist and match its SHA-256; otherwise the error wraps ErrChecksum. It
// returns the verified digest.
func VerifyChecksum(file, sums string) (string, error) {
	want, err := listedSum(sums, filepath.Base(file))
	if err != nil {
		return "", err
	}
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("release file: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("release file %s: %w", file, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want {
		return "", fmt.Errorf("%w: %s has SHA-256 %s, %s lists %s", ErrChecksum, file, got, sums, want)
	}
	return got, nil
}

// listedSum is the digest sums lists for name.
func listedSum(sums, name string) (string, error) {
	f, err := os.Open(sums)
	if err != nil {
		return "", fmt.Errorf("checksums: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxSums))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		sum, file, ok := strings.Cut(line, " ")
		file = strings.TrimPrefix(strings.TrimLeft(file, " "), "*") // "*name": sha256sum's binary mode
		if !ok || len(sum) != sha256.Size*2 || !isHex(sum) || file == "" {
			return "", fmt.Errorf("checksums %s line %d: want \"<64 hex digits>  <file name>\" as sha256sum prints it", sums, n)
		}
		if file == name {
			return strings.ToLower(sum), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("checksums %s: %w", sums, err)
	}
	return "", fmt.Errorf("%w: %s lists no %s", ErrChecksum, sums, name)
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// CopyInto copies file into dir under its base name, mode 0700, and returns the copy's
// path: what is checked and used is then a file no one else can change.
func CopyInto(file, dir string) (path string, err error) {
	in, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("release file: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return "", fmt.Errorf("release file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("release file %s: not a regular file", file)
	}
	path = filepath.Join(dir, filepath.Base(file))
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700) // a bare binary runs from here
	if err != nil {
		return "", fmt.Errorf("copy %s: %w", file, err)
	}
	_, err = io.Copy(out, io.LimitReader(in, maxBinary+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("copy %s: %w", file, err)
	}
	return path, nil
}

// IsArchive reports whether path names a release archive (.tar.gz, .tgz or .zip) rather
// than a bare binary.
func IsArchive(path string) bool {
	for _, ext := range []string{".tar.gz", ".tgz", ".zip"} {
		if strings.HasSuffix(strings.ToLower(path), ext) {
			return true
		}
	}
	return false
}

// ExtractBinary writes the cotal binary of a release archive (the top-level file "cotal"
// or "cotal.exe" of a .tar.gz or .zip that scripts/release made) to a new file in dir, mode
// 0700, and returns its path. Nothing else of the archive is written; an archive without
// the binary, with two, or with one larger than 512 MiB is refused.
func ExtractBinary(archive, dir string) (string, error) {
	var (
		path string
		err  error
	)
	if strings.HasSuffix(strings.ToLower(archive), ".zip") {
		path, err = fromZip(archive, dir)
	} else {
		path, err = fromTarGz(archive, dir)
	}
	if err != nil {
		return "", fmt.Errorf("release archive %s: %w", archive, err)
	}
	return path, nil
}

// isBinaryName reports whether an archive entry is the cotal binary.
func isBinaryName(name string) bool {
	name = strings.TrimPrefix(name, "./")
	return name == "cotal" || name == "cotal.exe"
}

func fromTarGz(archive, dir string) (out string, err error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("not a gzip file: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	defer func() {
		if err != nil && out != "" {
			_ = os.Remove(out) // refusing the archive: the binary written first goes too
			out = ""
		}
	}()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read: %w", err)
		}
		if !isBinaryName(h.Name) {
			continue
		}
		if h.Typeflag != tar.TypeReg || out != "" {
			return out, fmt.Errorf("entry %q: want one regular file named cotal", h.Name)
		}
		if out, err = writeBinary(tr, h.Size, dir); err != nil {
			return "", err
		}
	}
	if out == "" {
		return "", errors.New("no cotal binary in it")
	}
	return out, nil
}

func fromZip(archive, dir string) (string, error) {
	zr, err := zip.OpenReader(archive)
	if err != nil {
		return "", fmt.Errorf("not a zip file: %w", err)
	}
	defer zr.Close()
	var found *zip.File
	for _, zf := range zr.File {
		if !isBinaryName(zf.Name) {
			continue
		}
		if !zf.Mode().IsRegular() || found != nil {
			return "", fmt.Errorf("entry %q: want one regular file named cotal", zf.Name)
		}
		found = zf
	}
	if found == nil {
		return "", errors.New("no cotal binary in it")
	}
	r, err := found.Open()
	if err != nil {
		return "", fmt.Errorf("entry %q: %w", found.Name, err)
	}
	defer r.Close()
	return writeBinary(r, int64(found.UncompressedSize64), dir)
}

// writeBinary copies size bytes of r to a new 0700 file in dir.
func writeBinary(r io.Reader, size int64, dir string) (path string, err error) {
	if size <= 0 || size > maxBinary {
		return "", fmt.Errorf("the binary is %d bytes: want 1 to %d", size, maxBinary)
	}
	f, err := os.CreateTemp(dir, "cotal-release-*")
	if err != nil {
		return "", fmt.Errorf("unpack: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("unpack: %w", cerr)
		}
		if err != nil {
			_ = os.Remove(f.Name()) // failing already
		}
	}()
	n, err := io.Copy(f, io.LimitReader(r, size+1))
	if err != nil {
		return "", fmt.Errorf("unpack: %w", err)
	}
	if n != size {
		return "", fmt.Errorf("unpack: the binary holds %d bytes, its header says %d", n, size)
	}
	if err := f.Chmod(0o700); err != nil {
		return "", fmt.Errorf("unpack: %w", err)
	}
	return f.Name(), nil
}
