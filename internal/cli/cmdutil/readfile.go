package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"

	"github.com/cotal-ai/cotal/workspace"
)

// Size caps of the files a user names, by kind: each is far above any real file of its
// kind and far below what would hurt the machine.
const (
	MaxCredsFileSize    = 256 << 10                 // a creds file: a JWT and a seed
	MaxCAFileSize       = 4 << 20                   // a PEM bundle of CA certificates
	MaxPromptFileSize   = workspace.MaxPersonaSize  // a prompt or a persona file
	MaxManifestFileSize = workspace.MaxManifestSize // cotal.yaml or a host's space list
)

// UserFile is a file a person named on the command line (--creds FILE, --from FILE). It
// is read only when it is a regular file (or "-", standard input, where Stdin is set) of
// at most Max bytes, so a device such as /dev/zero, a FIFO or a folder is refused at once
// instead of hanging or filling memory.
type UserFile struct {
	Flag  string    // the flag or argument that named it, "--creds"
	Path  string    // the path to read; "-" is standard input when Stdin is set
	Shown string    // the path as the person gave it, for messages; "" shows Path
	Kind  string    // what it should hold, "a creds file"
	Max   int64     // the size cap, one of the Max*FileSize constants
	Stdin io.Reader // standard input, for "-"; nil refuses "-"
}

// Read returns the file's bytes, or a refusal (a usage error: exit 2) saying what was
// wrong with it. Nothing is read past Max+1 bytes.
func (u UserFile) Read() ([]byte, error) {
	if u.Path == "-" && u.Stdin != nil {
		return u.readCapped(u.Stdin, "standard input")
	}
	// Stat before opening: opening a named pipe waits for a writer, which may never come.
	if err := u.checkRegular(os.Stat(u.Path)); err != nil {
		return nil, err
	}
	f, err := os.Open(u.Path)
	if err != nil {
		return nil, u.refuse(openWhy(err))
	}
	defer f.Close() //nolint:errcheck // read only: nothing to lose
	// Check again what was opened: the path may have changed since.
	if err := u.checkRegular(f.Stat()); err != nil {
		return nil, err
	}
	return u.readCapped(f, u.Path)
}

// checkRegular refuses what a stat found unless it is a regular file within Max.
func (u UserFile) checkRegular(fi fs.FileInfo, err error) error {
	switch {
	case err != nil:
		return u.refuse(openWhy(err))
	case !fi.Mode().IsRegular():
		why := notRegular(fi.Mode())
		if u.Stdin != nil {
			why += " (- reads standard input)"
		}
		return u.refuse(why)
	case fi.Size() > u.Max:
		return u.refuse(u.tooBig(fi.Size()))
	}
	return nil
}

// Check refuses what Read would refuse, without keeping the bytes: for a file another
// part reads later.
func (u UserFile) Check() error {
	_, err := u.Read()
	return err
}

// CheckStat refuses what Read would refuse from a stat alone (a missing path, one that is
// not a regular file, one over Max), without opening it: for a file another part opens
// and reads later (a manifest, a backup archive), which must never wait on a named pipe.
// "-" passes unchecked where Stdin is set.
func (u UserFile) CheckStat() error {
	if u.Path == "-" && u.Stdin != nil {
		return nil
	}
	return u.checkRegular(os.Stat(u.Path))
}

func (u UserFile) readCapped(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, u.Max+1))
	if err != nil {
		return nil, u.refuse(fmt.Sprintf("reading %s: %v", name, err))
	}
	if int64(len(data)) > u.Max {
		return nil, u.refuse(u.tooBig(-1))
	}
	return data, nil
}

func (u UserFile) tooBig(size int64) string {
	if size < 0 {
		return fmt.Sprintf("it is over the %s limit of %s", byteCount(u.Max), u.Kind)
	}
	return fmt.Sprintf("it is %s, over the %s limit of %s", byteCount(size), byteCount(u.Max), u.Kind)
}

func (u UserFile) refuse(why string) error {
	shown := u.Shown
	if shown == "" {
		shown = u.Path
	}
	return RefuseUsage(u.Flag+" "+shown, why+"; give "+u.Kind, "")
}

// openWhy says in words why a file did not open.
func openWhy(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// notRegular names what a path is when it is not a regular file.
func notRegular(m fs.FileMode) string {
	kind := "something else"
	switch {
	case m.IsDir():
		kind = "a folder"
	case m&fs.ModeCharDevice != 0, m&fs.ModeDevice != 0:
		kind = "a device"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	}
	return "it is " + kind + ", not a regular file"
}

// byteCount writes n bytes for a person: 512 bytes, 64 KiB, 1 MiB.
func byteCount(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadCredsFile reads the creds file flag names (a path given with --creds), bounded.
func ReadCredsFile(flag, path string) ([]byte, error) {
	return UserFile{Flag: flag, Path: path, Kind: "a creds file (cotal mint writes one)", Max: MaxCredsFileSize}.Read()
}

// BackupFile is the backup archive flag names (--restore FILE, or "backup" for inspect's
// argument). It has no size cap: the backup package reads it as a stream, checking each
// member's size and sha256.
func BackupFile(flag, path string) UserFile {
	return UserFile{Flag: flag, Path: path, Kind: "a backup archive (cotal backup create writes one)", Max: math.MaxInt64}
}
