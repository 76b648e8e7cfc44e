package workspace

import "path/filepath"

// AuthDir is where the trust chain of the project's broker lives: <root>/.cotal/auth.
func (p *Project) AuthDir() string { return filepath.Join(p.Dir(), "auth") }

// CredsDir is where minted creds files of a space go: .cotal/auth/creds/space.<hex>.
func (p *Project) CredsDir(space string) string {
	return filepath.Join(p.AuthDir(), "creds", "space."+SpaceKey(space))
}

// DeliveryPidFile is the pidfile of the delivery daemon of space: .cotal/delivery.<hex>.pid.
func (p *Project) DeliveryPidFile(space string) string {
	return filepath.Join(p.Dir(), "delivery."+SpaceKey(space)+".pid")
}

// DeliveryLogFile is the log of the delivery daemon of space: .cotal/delivery.<hex>.log.
func (p *Project) DeliveryLogFile(space string) string {
	return filepath.Join(p.Dir(), "delivery."+SpaceKey(space)+".log")
}

// AuthServicePidFile is the pidfile of the auth service of space: .cotal/auth-service.<hex>.pid.
func (p *Project) AuthServicePidFile(space string) string {
	return filepath.Join(p.Dir(), "auth-service."+SpaceKey(space)+".pid")
}

// AuthServiceLogFile is the log of the auth service of space: .cotal/auth-service.<hex>.log.
func (p *Project) AuthServiceLogFile(space string) string {
	return filepath.Join(p.Dir(), "auth-service."+SpaceKey(space)+".log")
}
