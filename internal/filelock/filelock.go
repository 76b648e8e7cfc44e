// Package filelock takes and releases an exclusive advisory lock on an open file, without
// waiting, on every system cotal builds for: flock(2) on Unix, LockFileEx on Windows.
//
// The lock belongs to the open file (its description on Unix, its handle on Windows), so
// closing the file releases it, and a child that inherits the file shares it.
package filelock

import "os"

// TryLock takes an exclusive lock on f without waiting; false (and no error) means another
// holder has it.
func TryLock(f *os.File) (bool, error) { return tryLock(f) }

// Unlock releases the lock TryLock took on f.
func Unlock(f *os.File) error { return unlock(f) }
