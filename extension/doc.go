// Package extension manages operator extensions: executables named cotal-<name> that
// `cotal <name> ...` runs, like git and kubectl plugins.
//
// Extensions live under the extensions prefix, $XDG_CONFIG_HOME/cotal/extensions:
//
//	extensions.lock          the lock: per extension its name, version, install spec,
//	                         SHA-256, file and whether it is first-party (JSON)
//	.mutation.flock          the advisory lock file every change holds (flock)
//	store/<sha256>/cotal-<n> the installed executables, named by their content hash
//
// The lock is the commit point. An install writes the new executable to a temp name,
// fsyncs it, renames it into store/ under its hash, and only then rewrites the lock
// atomically; a crash before that rewrite leaves an unreferenced file, never a lock that
// names a file that is not there with its hash. Readers never take the advisory lock: they
// read the lock (replaced atomically) and ignore temp leftovers and unreferenced files,
// which the next change, holding the advisory lock, removes.
//
// First-party: an extension installed from a Go module under github.com/cotal-ai/ is
// first-party; so is a local file the operator marks with `cotal ext add --first-party`
// (a release build or a checkout of a first-party extension). `cotal update` verifies a
// first-party extension in place when it is at the CLI's version, and reinstalls it
// otherwise. See docs/extensions.md.
package extension
