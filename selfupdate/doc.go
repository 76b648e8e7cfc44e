// Package selfupdate is cotal's self-maintenance: it refuses an unsafe config ancestor, repairs
// the operator config and the seed personas, verifies or reinstalls operator extensions,
// and replaces the cotal binary.
//
// The order is the safety contract: CheckAncestors runs before anything is written, so a
// folder another user could change (a symlink, a foreign owner, a group- or world-writable
// folder without the sticky bit) above the config, machine home or project state stops
// update before any repair, seed or binary replacement.
package selfupdate
