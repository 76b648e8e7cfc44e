package up

import "os"

// procSelfExe names the running binary itself on Linux; it still execs after the file was
// deleted or replaced (go run deletes its temporary binary once the command returns).
const procSelfExe = "/proc/self/exe"

// selfExe is the path the broker process re-executes for its background child and its
// daemons: the running binary itself, so they run the very build that started them.
func selfExe(executable func() (string, error)) (string, error) {
	if _, err := os.Stat(procSelfExe); err == nil {
		return procSelfExe, nil
	}
	return executable()
}
