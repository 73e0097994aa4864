package splice

// ClientAckedAt reports when the client of spliced flow id last
// acknowledged new bytes, and whether it has since the splice. After the
// splice the reply bytes are the back-end's, sent by its shim straight to
// the client, so an advancing client ACK is a sign that the back-end and
// its shim are alive even when their control datagrams are late: the
// controller asks before it declares a silent back-end dead (a guest
// starved of CPU delays its keepalives while its transfer still moves).
// It is asked only for back-ends already silent, never per frame.
func (e *FrontEnd) ClientAckedAt(id FlowID) (Time, bool) {
	f := e.byID[id]
	if f == nil || f.state != stSpliced || f.cliAckAt == 0 {
		return 0, false
	}
	return f.cliAckAt, true
}
