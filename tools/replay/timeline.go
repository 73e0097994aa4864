package replay

// Handoff timelines (issue 11): with Config.Timeline the engine and the
// controller of a replay keep timelines exactly as the front-end daemon's
// do (the same code: splice.FrontEnd and frontend/controller), and each
// connection's record is written when it ends, in the daemon's format
// (frontend/timeline). Times are engine times: the capture's timestamps
// as fed. The simulated shim reports its response in one piece at the
// end of the service delay, so first_byte and last_byte coincide, and
// the Splice round trip is ControlDelay, which places them ControlDelay/2
// after the request left.

// writeTimelines writes the records of the call just handled.
func (r *replayer) writeTimelines() {
	if r.cfg.Timeline == nil || r.tlErr != nil {
		return
	}
	for i := range r.out.Timelines {
		r.tlBuf = r.out.Timelines[i].AppendJSON(r.tlBuf[:0])
		if _, err := r.cfg.Timeline.Write(r.tlBuf); err != nil {
			r.tlErr = err
			return
		}
	}
}

// flushTimelines writes, when the replay ends, the records of the
// connections the controller still holds (the capture ended before they
// closed, or they were lingering), marked at_stop, as the daemon does
// when it stops: a connection is never missing from the timelines
// because the capture was cut.
func (r *replayer) flushTimelines() {
	if r.cfg.Timeline == nil {
		return
	}
	r.out.Reset()
	r.ctrl.FlushTimelines(r.now, &r.out)
	r.writeTimelines()
}
