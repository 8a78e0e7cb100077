package testutil

import (
	"sync"
	"time"
)

// Clock is a fake clock for code that takes a now func (pass c.Now): the test moves time with
// Add and Set instead of sleeping. It is safe for concurrent use; mu guards t.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock showing t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
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

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
