// Package backend is the back-end shim daemon. It sits between the host
// kernel's IP stack (a TAP device the kernel's address lives on) and the
// wire (AF_PACKET on the NIC) and runs the splice.Shim engine: every
// frame passes unchanged in both directions except replies on spliced
// connections, which it rewrites to come from the VIP and sends straight
// to the client.
//
// The control protocol is the Agent's (agent.go), a pure state machine
// like the engine: it registers with the front-end until acknowledged,
// sends keepalives and registers again when their echoes stop, answers
// probes, has Splice messages installed in the engine before it
// acknowledges them (which is what guarantees no reply escapes
// untranslated), and turns finished responses into Feedback.
//
// Data flow (worker.go). Config.Workers packet loops, each on its own
// locked OS thread with its own engine shard, wire socket and, with
// offloads, TAP queue:
//
//	wire: N AF_PACKET sockets, one fanout group      TAP: N queues (IFF_MULTI_QUEUE)
//	  member k gets the C2 connections whose           queue k gets the same connections'
//	  ports hash to k (link.FanoutShard)               frames (eBPF steering, SteerByPorts)
//	            \                                         /
//	             worker k: epoll on both, one ReadBatch per ready link,
//	             every frame into shard k, one WriteBatch per link
//
// A worker sleeps in epoll_wait until a link is readable, a mailbox
// message arrives or its shard's (and, on worker 0, the agent's) next
// deadline comes; there is no ticker. Worker 0 also reads the control
// socket and owns the Agent; a Splice is installed in the shard that owns
// its C2 connection (shardOf), and the other shards' finished responses
// come to worker 0 to become Feedback, with the requests in service
// summed over the shards. Without CAP_BPF for the steering program the
// tun driver's flow table picks the queue, and TAP frames of a flow
// another worker owns, half of them under short connections, are handed
// over to it (readTAP says when and why).
//
// With CAP_BPF and TCX (-reply-fastpath, echo by default), most of a
// large response never reaches a worker (fastpath.go,
// Config.ReplyFastPath): a TC program on the TAP's egress
// translates the replies between a response's first and last and
// redirects them to the wire device, as each shard's engine allows
// (splice/shim_fastpath.go); it sends the other replies too and gives
// the worker their originals, marked as sent (echoes), so a response's
// first byte need not wait for a worker to wake. The worker applies
// its shard's commands after sending the pass's wire frames. The SYN fast path
// (-syn-fastpath, synfast.go, on by default) hands the front-end's SYNs
// that carry their request from the wire's ingress to the TAP in the
// kernel; the workers learn from their copies and write none
// (splice.ShimConfig.KernelSYNs). While the workers'
// threads use less than half a core, worker 0's loop serves every shard
// and the others park (gather.go, -gather): one wake-up per burst of
// frames instead of one per worker, half the system calls per frame.
//
// The control protocol does not cross the host's kernel (wirecontrol.go):
//
//	front-end datagram -> wire socket 0 (fanout: all UDP) -> shard 0 checks it as the
//	  kernel would (splice/shim_control.go) -> Output.Control -> Codec -> Agent, before
//	  the next frame of the batch (the request behind a Splice finds it installed)
//	Agent's SpliceAck/Feedback/Keepalive -> a frame worker 0 builds -> the pass's wire
//	  batch, ahead of its frames (Register, and all before the front-end's MAC is known
//	  or once it is stale: the control socket, through the TAP)
//
// The control socket stays open for what still comes through the kernel
// (IP fragments) and for Register.
//
// With Config.Offloads (the default) the TAP is link.OffloadTAP and the
// sockets carry virtio-net headers, so TCP super-frames of up to 64 KiB
// cross the shim whole and the kernel segments them. Without, the TAP is
// the portable water adapter, read by one goroutine that hands each
// frame to its flow's worker, and frames are MTU-sized.
//
// One clock: splice.Time is the monotonic time since Run started, read
// in the loop that feeds each input.
package backend
