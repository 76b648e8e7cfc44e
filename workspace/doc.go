// Package workspace is the project's state on disk: the .cotal/ control directory found by
// walking up from a folder (like .git), the mesh record `cotal up` leaves there so later
// commands find the broker, and pidfiles pinned to their process's start time so a reused pid
// is never mistaken for a daemon.
//
// Folders are created 0700 and files written 0600; every write goes through
// internal/atomicfile (temp file + fsync + rename + fsync of the folder), so a crash leaves
// the old file or the new one, never half of one.
package workspace
