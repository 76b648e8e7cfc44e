package trust

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// stateFiles are the files of a space's state folder (space.<hex>/) that go with the
// chain: the IdP pin, the bearer issuer key, the owner secret and the sentinel creds
// (authsvc.PinFile, bearer.IssuerKeyFile, bearer.OwnerSecretFile, authsvc.SentinelFile).
// A running auth service's readiness file (auth-service.json) is one node's state, and
// stays behind.
var stateFiles = map[string]bool{"idp.json": true, "issuer.json": true, "owner-secret.json": true, "sentinel.creds": true}

// chainEntry reports whether name, a slash-separated path relative to the trust folder,
// is part of the trust chain an archive carries: broker.json, account.<hex>.json,
// auth.<hex>.json, a space's state folder space.<hex>/ with its stateFiles, and its
// agents/<actor>.json identities. Everything else (creds minted on this machine, the
// broker's resolver folder accounts/, temp files, a readiness file) is not.
func chainEntry(name string, dir bool) bool {
	parts := strings.Split(name, "/")
	if len(parts) > 1 && !hexName(parts[0], "space.", "") {
		return false
	}
	switch len(parts) {
	case 1:
		if dir {
			return hexName(name, "space.", "")
		}
		return name == brokerFileName || hexName(name, accountFilePrefix, accountFileSuffix) ||
			hexName(name, userAuthFilePrefix, userAuthFileSuffix)
	case 2:
		if dir {
			return parts[1] == "agents"
		}
		return stateFiles[parts[1]]
	case 3:
		actor, ok := strings.CutSuffix(parts[2], ".json")
		return !dir && parts[1] == "agents" && ok && actor != "" && !strings.HasPrefix(actor, ".")
	}
	return false
}

// hexName reports whether name is prefix, a space key (protocol.SpaceKey: lowercase hex)
// and suffix.
func hexName(name, prefix, suffix string) bool {
	key, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	if key, ok = strings.CutSuffix(key, suffix); !ok || key == "" || len(key)%2 != 0 {
		return false
	}
	for _, r := range key {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// Bounds on an archive being imported.
const (
	maxArchiveFiles    = 10000
	maxArchiveFileSize = 1 << 20
	maxArchiveSize     = 64 << 20 // all its files together
)

// ErrChainExists reports an import over a folder that holds another trust chain.
var ErrChainExists = errors.New("the folder already holds another trust chain")

// Export writes the trust chain kept in dir to w as a tar archive: broker.json, every
// space account, identities and user-auth keys (a user-auth space's state folder with its
// IdP pin, bearer issuer key, owner secret and sentinel creds): the files chainEntry
// names, and nothing else. Creds minted on this machine, the broker's resolver folder, a
// running auth service's readiness file and anything else in dir are left out. The chain
// is opened (and so checked) first. It returns how many files it wrote. The archive holds every secret of the mesh: keep it as
// carefully as the folder.
func Export(dir string, w io.Writer) (int, error) {
	if _, err := os.Stat(filepath.Join(dir, brokerFileName)); err != nil {
		return 0, fmt.Errorf("export trust chain: %w", err)
	}
	c, err := Open(dir)
	if err != nil {
		return 0, fmt.Errorf("export trust chain: %w", err)
	}
	if _, err := c.AccountJWTs(); err != nil { // every account file loads
		return 0, fmt.Errorf("export trust chain: %w", err)
	}
	tw := tar.NewWriter(w)
	n := 0
	epoch := time.Unix(0, 0).UTC()
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		if !chainEntry(name, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: dirMode, ModTime: epoch})
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: fileMode, Size: int64(len(b)), ModTime: epoch}); err != nil {
				return err
			}
			n++
			_, err = tw.Write(b)
			return err
		}
		return nil // sockets, links: not part of a chain
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return 0, fmt.Errorf("export trust chain %s: %w", dir, err)
	}
	return n, nil
}

// ImportResult says what Import did.
type ImportResult struct {
	Files     int    // files in the archive
	Unchanged bool   // dir already held exactly this chain; nothing was written
	Replaced  string // with force, where the chain dir held before was moved ("" when none)
}

// Import unpacks a trust chain archive (Export's) into dir. The archive is read whole and
// refused, before anything is written, if it holds anything Export does not write; it is
// then unpacked beside dir and opened (so checked) before dir changes; dir is then created from it. A dir
// that already holds a chain (a broker.json or account files) is left alone and the import
// refused with ErrChainExists, unless it holds exactly the archive's files (Unchanged) or
// force is set: then the old dir is moved aside to <dir>.replaced.<n>, never deleted.
func Import(r io.Reader, dir string, force bool) (ImportResult, error) {
	dir = filepath.Clean(dir)
	arch, err := readArchive(r)
	if err != nil {
		return ImportResult{}, fmt.Errorf("import trust chain: %w", err)
	}
	files := arch.files
	if _, ok := files[brokerFileName]; !ok {
		return ImportResult{}, fmt.Errorf("import trust chain: the archive holds no %s: not an archive of `cotal broker export`", brokerFileName)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, dirMode); err != nil {
		return ImportResult{}, fmt.Errorf("import trust chain: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".import-")
	if err != nil {
		return ImportResult{}, fmt.Errorf("import trust chain: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := arch.writeTo(tmp); err != nil {
		return ImportResult{}, fmt.Errorf("import trust chain: %w", err)
	}
	c, err := Open(tmp)
	if err != nil {
		return ImportResult{}, fmt.Errorf("import trust chain: the archive's chain does not load: %w", err)
	}
	if _, err := c.AccountJWTs(); err != nil {
		return ImportResult{}, fmt.Errorf("import trust chain: the archive's chain does not load: %w", err)
	}
	res := ImportResult{Files: len(files)}
	held, err := holdsChain(dir)
	if err != nil {
		return ImportResult{}, fmt.Errorf("import trust chain: %w", err)
	}
	if held {
		same, err := sameFiles(dir, files)
		if err != nil {
			return ImportResult{}, fmt.Errorf("import trust chain: %w", err)
		}
		if same {
			res.Unchanged = true
			return res, nil
		}
		if !force {
			return ImportResult{}, fmt.Errorf("import trust chain into %s: %w", dir, ErrChainExists)
		}
		for i := 1; ; i++ {
			aside := dir + ".replaced." + strconv.Itoa(i)
			if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
				if err := os.Rename(dir, aside); err != nil {
					return ImportResult{}, fmt.Errorf("import trust chain: move the old chain aside: %w", err)
				}
				res.Replaced = aside
				break
			}
		}
	} else if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		// dir exists without a chain: only an empty folder is taken over; anything else
		// stays, and the import is refused.
		return ImportResult{}, fmt.Errorf("import trust chain into %s: the folder is not empty: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return ImportResult{}, fmt.Errorf("import trust chain: %w", err)
	}
	return res, nil
}

// archive is a chain archive read into memory: its files' contents by name, and its
// folders.
type archive struct {
	files map[string][]byte
	dirs  []string
}

// readArchive reads and checks a whole archive, writing nothing. Only folders and plain
// files that are part of a chain (chainEntry) with clean relative names are accepted.
func readArchive(r io.Reader) (archive, error) {
	tr := tar.NewReader(r)
	files := map[string][]byte{}
	var dirs []string
	total := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return archive{}, fmt.Errorf("read the archive: %w", err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "\\") {
			return archive{}, fmt.Errorf("the archive names %q: want a relative path inside the chain", h.Name)
		}
		if h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg {
			return archive{}, fmt.Errorf("the archive's %s is not a plain file or folder", name)
		}
		if !chainEntry(name, h.Typeflag == tar.TypeDir) {
			return archive{}, fmt.Errorf("the archive holds %q, which is not part of a trust chain (cotal broker export never writes it): import only an archive cotal broker export wrote", name)
		}
		if h.Typeflag == tar.TypeDir {
			dirs = append(dirs, name)
			continue
		}
		if len(files) >= maxArchiveFiles {
			return archive{}, fmt.Errorf("the archive holds more than %d files", maxArchiveFiles)
		}
		if h.Size > maxArchiveFileSize {
			return archive{}, fmt.Errorf("the archive's %s is %d bytes: a trust file is far smaller", name, h.Size)
		}
		if total += int(h.Size); total > maxArchiveSize {
			return archive{}, fmt.Errorf("the archive's files add up to more than %d bytes: a trust chain is far smaller", maxArchiveSize)
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxArchiveFileSize+1))
		if err != nil {
			return archive{}, fmt.Errorf("read the archive's %s: %w", name, err)
		}
		files[name] = b
	}
	return archive{files: files, dirs: dirs}, nil
}

// writeTo writes the archive's folders and files under dir.
func (a archive) writeTo(dir string) error {
	for _, name := range a.dirs {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(name)), dirMode); err != nil {
			return err
		}
	}
	for name, b := range a.files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), dirMode); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, fileMode); err != nil {
			return err
		}
	}
	return nil
}

// holdsChain reports whether dir holds a trust chain: a broker.json or an account file.
func holdsChain(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.Name() == brokerFileName || strings.HasPrefix(e.Name(), accountFilePrefix) {
			return true, nil
		}
	}
	return false, nil
}

// sameFiles reports whether dir holds exactly the files of an archive (what Export would
// write of it).
func sameFiles(dir string, files map[string][]byte) (bool, error) {
	var buf bytes.Buffer
	if _, err := Export(dir, &buf); err != nil {
		return false, err
	}
	have, err := unpackNames(&buf)
	if err != nil {
		return false, err
	}
	if len(have) != len(files) {
		return false, nil
	}
	for name, b := range files {
		if !bytes.Equal(have[name], b) {
			return false, nil
		}
	}
	return true, nil
}

// unpackNames reads an archive's files into memory.
func unpackNames(r io.Reader) (map[string][]byte, error) {
	tr := tar.NewReader(r)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			out[h.Name] = b
		}
	}
}
