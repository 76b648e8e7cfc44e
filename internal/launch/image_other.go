//go:build !linux

package launch

// runningImage is empty: this system has no name for the running image, so Command runs
// Self's path.
func runningImage() string { return "" }
