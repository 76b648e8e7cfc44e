package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cotal-ai/cotal/protocol"
)

// AuthDir is where the trust chain of the project's broker lives: <root>/.cotal/auth.
func (p *Project) AuthDir() string { return filepath.Join(p.Dir(), "auth") }

// CredsDir is where minted creds files of a space go: .cotal/auth/creds/space.<hex>.
func (p *Project) CredsDir(space string) string {
	return filepath.Join(p.AuthDir(), "creds", "space."+protocol.SpaceKey(space))
}

// DeliveryPidFile is the pidfile of the delivery daemon of space: .cotal/delivery.<hex>.pid.
func (p *Project) DeliveryPidFile(space string) string {
	return filepath.Join(p.Dir(), "delivery."+protocol.SpaceKey(space)+".pid")
}

// ManagerPidFile is the pidfile of the agent manager of space: .cotal/manager.<hex>.pid.
func (p *Project) ManagerPidFile(space string) string {
	return filepath.Join(p.Dir(), "manager."+protocol.SpaceKey(space)+".pid")
}

// ManagerLogFile is the log of the agent manager of space: .cotal/manager.<hex>.log.
func (p *Project) ManagerLogFile(space string) string {
	return filepath.Join(p.Dir(), "manager."+protocol.SpaceKey(space)+".log")
}

// DeliveryLogFile is the log of the delivery daemon of space: .cotal/delivery.<hex>.log.
func (p *Project) DeliveryLogFile(space string) string {
	return filepath.Join(p.Dir(), "delivery."+protocol.SpaceKey(space)+".log")
}

// AuthServicePidFile is the pidfile of the auth service of space: .cotal/auth-service.<hex>.pid.
func (p *Project) AuthServicePidFile(space string) string {
	return filepath.Join(p.Dir(), "auth-service."+protocol.SpaceKey(space)+".pid")
}

// AuthServiceLogFile is the log of the auth service of space: .cotal/auth-service.<hex>.log.
func (p *Project) AuthServiceLogFile(space string) string {
	return filepath.Join(p.Dir(), "auth-service."+protocol.SpaceKey(space)+".log")
}

// HeldFile is the marker `cotal down <component>` leaves beside the daemon pidfile
// pidFile: while it exists the broker process does not restart that daemon, and `cotal up`
// removes it.
func HeldFile(pidFile string) string { return strings.TrimSuffix(pidFile, ".pid") + ".held" }

// heldForMesh is the held mark of a bare `cotal down`, which stops the broker next.
const heldForMesh = "held by cotal down, which stops the whole mesh\n"

// Hold leaves the held mark of the daemon whose pidfile is pidFile (mode 0600). wholeMesh
// says a bare `cotal down` leaves it, which stops the whole mesh next (see HeldForMesh).
func Hold(pidFile string, wholeMesh bool) error {
	text := "held by cotal down; cotal up releases it\n"
	if wholeMesh {
		text = heldForMesh
	}
	return os.WriteFile(HeldFile(pidFile), []byte(text), 0o600)
}

// HeldForMesh reports whether the held mark of the daemon whose pidfile is pidFile was
// left by a bare `cotal down`: the whole mesh is stopping, not that daemon alone.
func HeldForMesh(pidFile string) bool {
	b, err := os.ReadFile(HeldFile(pidFile))
	return err == nil && string(b) == heldForMesh
}

// ReleaseHeld removes the held markers of the project's daemons (of spaces only, when
// given), so the broker process starts them again.
func (p *Project) ReleaseHeld(spaces ...string) error {
	var files []string
	if len(spaces) == 0 {
		var err error
		if files, err = filepath.Glob(filepath.Join(p.Dir(), "*.held")); err != nil {
			return fmt.Errorf("find held daemons: %w", err)
		}
	}
	for _, s := range spaces {
		for _, d := range Daemons() {
			files = append(files, HeldFile(d.PidFile(p, s)))
		}
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("release a held daemon: %w", err)
		}
	}
	return nil
}

// Daemon is a kind of per-space daemon the broker process runs, and its files in the
// project folder.
type Daemon struct {
	Component string                                // how cotal down and cotal status name it: "delivery", "auth"
	Title     string                                // how messages name it: "delivery daemon"
	Glob      string                                // its pidfiles in the project folder
	PidFile   func(p *Project, space string) string // one space's pidfile
	LogFile   func(p *Project, space string) string // one space's log
}

// Daemons are the per-space daemons: the delivery daemon, and the auth service of a
// user-auth space.
func Daemons() []Daemon {
	return []Daemon{
		{Component: "delivery", Title: "delivery daemon", Glob: "delivery.*.pid",
			PidFile: (*Project).DeliveryPidFile, LogFile: (*Project).DeliveryLogFile},
		{Component: "auth", Title: "auth service", Glob: "auth-service.*.pid",
			PidFile: (*Project).AuthServicePidFile, LogFile: (*Project).AuthServiceLogFile},
		{Component: "manager", Title: "agent manager", Glob: "manager.*.pid",
			PidFile: (*Project).ManagerPidFile, LogFile: (*Project).ManagerLogFile},
	}
}

// DaemonNamed is the daemon of component name ("delivery", "auth" or "manager").
func DaemonNamed(name string) (Daemon, bool) {
	for _, d := range Daemons() {
		if d.Component == name {
			return d, true
		}
	}
	return Daemon{}, false
}
