// Package cputime reads the CPU time this process has used, user and system together, on
// every system cotal builds for; benchmarks report it as a ratio against a baseline.
package cputime

import "time"

// Process is the CPU time (user and system) this process has used so far.
func Process() (time.Duration, error) { return process() }
