package sched

import "slices"

// BackendID names a back-end host.
type BackendID uint32

// Dispatcher chooses a back-end for each request: the live back-end
// serving the request's port with the fewest requests in progress, never
// more than the back-end's capacity. Ties go to the back-end that was
// started on least recently, so equally idle back-ends take turns.
//
// Its count of active requests is kept by Start and Done, and corrected
// by Report whenever the back-end tells its own, which is the truth: the
// front-end's count drifts when a completion is missed.
type Dispatcher struct {
	backends []backend // sorted by id, so Pick is deterministic
	starts   uint64    // clock of Start calls, for the round robin among ties
}

type backend struct {
	id        BackendID
	capacity  int
	ports     []uint16 // empty: every port
	alive     bool
	active    int
	lastStart uint64 // value of starts at this back-end's last Start; 0 never
}

// NewDispatcher returns a Dispatcher with no back-ends.
func NewDispatcher() *Dispatcher { return &Dispatcher{} }

// AddBackend adds a back-end, alive and idle, that serves at most capacity
// requests at once on the given VIP ports (an empty list means every port).
// A capacity below 1 keeps the back-end from being picked: draining.
// Adding an id again updates its capacity and ports and keeps its liveness
// and active count.
func (d *Dispatcher) AddBackend(id BackendID, capacity int, ports []uint16) {
	ports = slices.Clone(ports)
	if b := d.find(id); b != nil {
		b.capacity, b.ports = capacity, ports
		return
	}
	i, _ := slices.BinarySearchFunc(d.backends, id, byID)
	d.backends = slices.Insert(d.backends, i, backend{id: id, capacity: capacity, ports: ports, alive: true})
}

// RemoveBackend forgets a back-end; unknown ids are ignored.
func (d *Dispatcher) RemoveBackend(id BackendID) {
	if i, ok := slices.BinarySearchFunc(d.backends, id, byID); ok {
		d.backends = slices.Delete(d.backends, i, i+1)
	}
}

// SetAlive marks a back-end up or down, as health checks find it. A dead
// back-end is not picked; its active count is kept, since its requests
// may still finish.
func (d *Dispatcher) SetAlive(id BackendID, alive bool) {
	if b := d.find(id); b != nil {
		b.alive = alive
	}
}

// Pick returns the back-end the next request for port should go to, or
// false when no live back-end serving port has room. It changes nothing:
// call Start once the request is actually sent there.
func (d *Dispatcher) Pick(port uint16) (BackendID, bool) {
	var best *backend
	for i := range d.backends {
		b := &d.backends[i]
		if !b.alive || b.active >= b.capacity || !b.serves(port) {
			continue
		}
		if best == nil || b.active < best.active ||
			b.active == best.active && b.lastStart < best.lastStart {
			best = b
		}
	}
	if best == nil {
		return 0, false
	}
	return best.id, true
}

// Start counts one more request in progress on id.
func (d *Dispatcher) Start(id BackendID) {
	if b := d.find(id); b != nil {
		d.starts++
		b.active++
		b.lastStart = d.starts
	}
}

// Done counts one request on id as finished. The count never goes below
// zero, so a completion reported twice does no lasting harm.
func (d *Dispatcher) Done(id BackendID) {
	if b := d.find(id); b != nil && b.active > 0 {
		b.active--
	}
}

// Report replaces the count of active requests on id with the back-end's
// own; negative values count as zero.
func (d *Dispatcher) Report(id BackendID, concurrency int) {
	if b := d.find(id); b != nil {
		b.active = max(concurrency, 0)
	}
}

// Active returns the number of requests in progress on id, 0 if unknown.
func (d *Dispatcher) Active(id BackendID) int {
	if b := d.find(id); b != nil {
		return b.active
	}
	return 0
}

func (d *Dispatcher) find(id BackendID) *backend {
	if i, ok := slices.BinarySearchFunc(d.backends, id, byID); ok {
		return &d.backends[i]
	}
	return nil
}

func byID(b backend, id BackendID) int {
	switch {
	case b.id < id:
		return -1
	case b.id > id:
		return 1
	}
	return 0
}

func (b *backend) serves(port uint16) bool {
	return len(b.ports) == 0 || slices.Contains(b.ports, port)
}
