package sched

import "testing"

func pick(t *testing.T, d *Dispatcher, port uint16) BackendID {
	t.Helper()
	id, ok := d.Pick(port)
	if !ok {
		t.Fatalf("Pick(%d) found no back-end", port)
	}
	return id
}

func TestDispatcherLeastConnections(t *testing.T) {
	d := NewDispatcher()
	for _, id := range []BackendID{1, 2, 3} {
		d.AddBackend(id, 10, nil)
	}
	d.Report(1, 4)
	d.Report(2, 1)
	d.Report(3, 2)
	if got := pick(t, d, 80); got != 2 {
		t.Fatalf("picked %d, want 2 (fewest active)", got)
	}
	d.Start(2)
	d.Start(2)
	// Now 4, 3, 2: back-end 3 has fewest.
	if got := pick(t, d, 80); got != 3 {
		t.Fatalf("picked %d, want 3", got)
	}
}

func TestDispatcherRespectsCapacity(t *testing.T) {
	d := NewDispatcher()
	d.AddBackend(1, 2, nil)
	d.AddBackend(2, 1, nil)
	for range 3 {
		d.Start(pick(t, d, 80))
	}
	if d.Active(1) != 2 || d.Active(2) != 1 {
		t.Fatalf("active %d and %d, want 2 and 1", d.Active(1), d.Active(2))
	}
	if id, ok := d.Pick(80); ok {
		t.Fatalf("picked %d although every back-end is full", id)
	}
	d.Done(2)
	if got := pick(t, d, 80); got != 2 {
		t.Fatalf("picked %d, want 2 which has room again", got)
	}
	d.AddBackend(3, 0, nil) // draining
	d.Start(2)
	if id, ok := d.Pick(80); ok {
		t.Fatalf("picked %d: a capacity-0 back-end must never be picked", id)
	}
}

// Three idle back-ends, each request finished before the next arrives:
// the work must rotate 1,2,3,1,2,3 instead of always going to back-end 1.
func TestDispatcherTiesRotate(t *testing.T) {
	d := NewDispatcher()
	for _, id := range []BackendID{3, 1, 2} { // insertion order must not matter
		d.AddBackend(id, 5, []uint16{80})
	}
	var got []BackendID
	for range 6 {
		id := pick(t, d, 80)
		got = append(got, id)
		d.Start(id)
		d.Done(id)
	}
	want := []BackendID{1, 2, 3, 1, 2, 3}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sequence %v, want %v", got, want)
		}
	}
}

func TestDispatcherSkipsDeadAndOtherPorts(t *testing.T) {
	d := NewDispatcher()
	d.AddBackend(1, 5, []uint16{80})
	d.AddBackend(2, 5, []uint16{80, 443})
	d.AddBackend(3, 5, []uint16{8080})
	if got := pick(t, d, 443); got != 2 {
		t.Fatalf("port 443 went to %d, want 2", got)
	}
	if got := pick(t, d, 8080); got != 3 {
		t.Fatalf("port 8080 went to %d, want 3", got)
	}
	if id, ok := d.Pick(22); ok {
		t.Fatalf("port 22 went to %d, nobody serves it", id)
	}
	d.SetAlive(1, false)
	for range 3 {
		id := pick(t, d, 80)
		if id != 2 {
			t.Fatalf("port 80 went to %d while 1 is dead", id)
		}
		d.Start(id)
	}
	d.SetAlive(2, false)
	if id, ok := d.Pick(80); ok {
		t.Fatalf("picked dead back-end %d", id)
	}
	d.SetAlive(1, true)
	if got := pick(t, d, 80); got != 1 {
		t.Fatalf("revived back-end not picked: %d", got)
	}
}

func TestDispatcherCounts(t *testing.T) {
	d := NewDispatcher()
	d.AddBackend(7, 3, nil)
	d.Done(7)
	if d.Active(7) != 0 {
		t.Fatalf("Done on an idle back-end went below zero: %d", d.Active(7))
	}
	d.Start(7)
	d.Start(7)
	d.Report(7, 5) // the back-end knows better
	if d.Active(7) != 5 {
		t.Fatalf("Report did not override: %d", d.Active(7))
	}
	if id, ok := d.Pick(80); ok {
		t.Fatalf("picked %d with 5 active over capacity 3", id)
	}
	d.Report(7, -2)
	if d.Active(7) != 0 {
		t.Fatalf("negative report gave %d", d.Active(7))
	}
	d.Start(7)
	d.AddBackend(7, 1, []uint16{80}) // update keeps the count
	if d.Active(7) != 1 {
		t.Fatalf("re-adding reset the active count to %d", d.Active(7))
	}
	if id, ok := d.Pick(80); ok {
		t.Fatalf("picked %d after capacity was lowered to 1 with 1 active", id)
	}
	d.RemoveBackend(7)
	if d.Active(7) != 0 {
		t.Fatal("removed back-end still counted")
	}
	d.Start(7) // unknown ids are ignored
	if _, ok := d.Pick(80); ok {
		t.Fatal("picked from an empty dispatcher")
	}
}

func TestDispatcherCopiesPorts(t *testing.T) {
	d := NewDispatcher()
	ports := []uint16{80}
	d.AddBackend(1, 1, ports)
	ports[0] = 443
	if _, ok := d.Pick(80); !ok {
		t.Fatal("changing the caller's slice changed the back-end's ports")
	}
}
