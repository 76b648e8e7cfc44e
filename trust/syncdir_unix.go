//go:build !windows

package trust

import "os"

// syncDir fsyncs a folder so a new entry in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close() // the sync error is the one to report
		return err
	}
	return d.Close()
}
