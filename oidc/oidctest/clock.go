package oidctest

import (
	"sync"
	"time"
)

// Clock is a settable clock for tests of an Issuer and of what asks it: pass Now as their
// clock and move it with Add.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock is a clock that reads t until moved.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
