package cloud

import "sync"

// Hold keeps matching calls open until Release: each blocks its caller, and
// takes effect only once released.
type Hold struct {
	c       *Cloud
	match   func(Call) bool
	arrived chan struct{}
	release chan struct{}

	mu          sync.Mutex
	calls       []Call
	arriveOnce  sync.Once
	releaseOnce sync.Once
}

// Hold starts holding every call for which match returns true (every call,
// if match is nil), until the returned Hold is released.
func (c *Cloud) Hold(match func(Call) bool) *Hold {
	h := &Hold{c: c, match: match, arrived: make(chan struct{}), release: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		close(h.release)
		return h
	}
	c.holds = append(c.holds, h)
	return h
}

// Arrived is closed when the first matching call is being held.
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Calls returns the calls held so far.
func (h *Hold) Calls() []Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Call(nil), h.calls...)
}

// Release lets the held calls (and any later match) proceed, and stops
// holding. It is safe to call more than once.
func (h *Hold) Release() {
	h.releaseOnce.Do(func() {
		h.c.mu.Lock()
		for i, other := range h.c.holds {
			if other == h {
				h.c.holds = append(h.c.holds[:i], h.c.holds[i+1:]...)
				break
			}
		}
		h.c.mu.Unlock()
		close(h.release)
	})
}

// Close releases every hold and makes later holds pass at once, so no
// caller stays blocked after a test environment stops.
func (c *Cloud) Close() {
	c.mu.Lock()
	holds := append([]*Hold(nil), c.holds...)
	c.closed = true
	c.mu.Unlock()
	for _, h := range holds {
		h.Release()
	}
}

// waitIfHeld blocks while a hold matches the call.
func (c *Cloud) waitIfHeld(call Call) {
	c.mu.Lock()
	var h *Hold
	for _, candidate := range c.holds {
		if candidate.match == nil || candidate.match(call) {
			h = candidate
			break
		}
	}
	c.mu.Unlock()
	if h == nil {
		return
	}
	h.mu.Lock()
	h.calls = append(h.calls, call)
	h.mu.Unlock()
	h.arriveOnce.Do(func() { close(h.arrived) })
	<-h.release
}
