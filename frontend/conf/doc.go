// Package conf reads the front-end's configuration file.
//
// Place in the data flow: qsplice-frontend calls Load once at start (and
// again on reload), logs what Check says, and builds the daemon's settings
// from the File: the link and addresses for the packet engine, the control
// socket and key for the back-end protocol, the listeners and customers for
// the scheduler. For every request head the engine parses, the front-end
// asks Classify which customer the Host header belongs to. Nothing here
// touches the network or the clock.
//
// The file is YAML, decoded through yaml.Node so that every problem is
// reported with its line and key path, all of them at once:
//
//	front.yaml:14: customers[1].reservation: must be >= 0
//	front.yaml:9: scheduler: unknown key "cycel" (known: cycle, typical_service_time, ...)
//
// List indexes in paths count from 0. Keys are case-sensitive; a key
// given twice, YAML merge keys (<<) and more than one document are
// errors. Anchors and aliases may be used. A key with no value (or ~)
// takes its default.
//
// Durations are Go durations ("10ms", "2s", "15m"). Sizes are bytes,
// with an optional K, M or G suffix meaning 2^10, 2^20, 2^30 ("16K").
// Addresses are written "198.18.0.2", and "198.18.0.2:7400" with a port.
//
// # Schema
//
// Required keys are marked so; every other key shows its default.
//
//	link:                        # required
//	  interface: eth0            # required; kernel interface (afpacket) or TAP name (tap)
//	  type: afpacket             # afpacket: bump on a kernel interface; tap: userspace host on a TAP device
//	  mac: ""                    # our MAC; "": the interface's (afpacket) or a generated one (tap)
//	handoff: 198.18.0.101        # required; unicast IPv4 source of handoff connections; not a listener VIP
//	admin: ""                    # address:port for HTTP /status and /metrics; "": off
//	control:                     # required
//	  listen: 198.18.0.2:7400    # required; UDP address:port where back-ends register
//	  key_file: /run/qsplice/key # required; control-protocol key (proto.LoadKey)
//	capture: ""                  # pcap file of every frame on the link; "": none
//	tcp:
//	  linger: 5s                 # > 0; a closed connection is remembered this long
//	  idle_timeout: 15m          # > 0; a spliced connection silent this long is reset
//	  head_timeout: 10s          # > 0; the request head must arrive within this (else 408)
//	  max_head: 8K               # 512..64K; longer request heads get 431
//	  cookie_seed: ""            # derives the SYN-cookie secret; "": random at each start
//	  max_flows: 200000          # >= 0; flows of every state; when full, the oldest without
//	                             #   a complete head is reset for a new one, else SYNs are
//	                             #   dropped and cookie ACKs reset; 0: no limit
//	  max_flows_per_source: 2000 # >= 0; the same for one client address's connections
//	                             #   reading their head or being answered (queued ones
//	                             #   do not count: the queues bound them); 0: no limit
//	  max_ports_per_source: 4096 # >= 0; handoff ports held for one client address, beyond
//	                             #   which its requests get 503; 0: no limit
//	  flow_lifetime: 30s         # > head_timeout; whole life of a connection not handed off
//	                             #   (its answer and linger included), then it is reset
//	  half_close_timeout: 30s    # > 0; after the back-end's FIN, a client silent this long
//	                             #   is reset on both sides and its handoff port freed
//	backends:
//	  concurrency_cap: 0         # >= 0; most requests at once on one back-end; 0: as it registers
//	  expected: 0                # >= 0; back-ends normally present, for Check; 0: unknown
//	  handoff_ahead: 2           # 0..64; handoffs set up per back-end beyond its concurrency, so
//	                             #   the C2 handshake and Splice round trip take no slot time
//	  keepalive_interval: 1s     # > 0; told to back-ends when they register
//	  splice_retry: 250ms        # > 0; resend an unacknowledged Splice message after this
//	scheduler:
//	  cycle: 10ms                # > 0; how often credit is handed out
//	  typical_service_time: 20ms # > 0; what one normal-sized request costs
//	  normal_size: {min: 0, max: 16K}  # the response sizes reservations assume; others are counted per customer (outside_normal_size)
//	  balance_limit: 100ms       # > 0; most unused credit a customer keeps
//	  debt_limit: 1s             # > 0; most a customer may overdraw
//	  queue_timeout: 2s          # > 0; a request queued longer gets 503
//	  cap_window: 1s             # > 0; customers' caps are averaged over this window
//	  queue_capacity: 1000       # >= 1; queue length of each customer unless it sets its own
//	  retry_after: 1s            # whole seconds >= 0; Retry-After in 503 answers; 0: no header
//	  default_customer: default  # customer of requests whose Host matches no domain
//	listeners:                   # required, at least one; VIP:port pairs must differ
//	  - vip: 198.18.0.100        # required; unicast IPv4
//	    port: 80                 # required; 1..65535
//	    policy: credit           # credit (reservations, caps, weights) | fifo (one queue)
//	                             # | lifo-pri | eight-fifo | single-fifo (URL classes below)
//	                             # | feedback (feedback classes below)
//	    queue_timeout: 0s        # > 0 if given; fifo and class-based listeners only: 503 to
//	                             #   requests queued longer; default: fifo 10s, the others
//	                             #   lifo.queue_timeout (credit: scheduler.queue_timeout)
//	customers:                   # may be empty: everything goes to the default customer
//	  - name: A                  # required, unique; letters, digits, '-', '_', '.'
//	    domains: [a.example, "*.a.example"]  # none by default
//	    reservation: 0           # >= 0; guaranteed req/s of normal-sized requests
//	    cap: 0                   # >= 0 and >= reservation; most req/s served; 0: no cap
//	    weight: 1                # > 0; share of spare capacity
//	    queue_capacity: 0        # >= 0; 0: scheduler.queue_capacity
//	classes:                     # default: sched.DefaultClasses(), the eight of the LIFO-Pri experiment
//	  - name: main               # required, unique; letters, digits, '-', '_', '.'
//	    kind: browsing           # required; browsing | transaction
//	    utility: 27              # required, > 0; worth of serving one request
//	    queue_capacity: 0        # >= 0; 0: 50 for browsing, 25 for transaction
//	    patterns: [/, "/main*"]  # "/x" exact, "/x*" prefix; the query string is ignored
//	lifo:
//	  upper: 0.95                # browsing queues turn LIFO above this utilization
//	  lower: 0.85                # <= upper; and FIFO again below this one
//	  interval: 1s               # > 0; utilization measurement period
//	  single_capacity: 100       # >= 1; queue length of single-fifo listeners
//	  queue_timeout: 10s         # > 0; 503 to requests queued longer
//	feedback:                    # feedback listeners; see testdata/feedback.yaml
//	  period: 50ms               # >= 1ms; the loops' period T
//	  target_queue: 50           # >= 1; target_q of each class unless it sets its own
//	  q0: 1.0                    # target_in = in + q0*e(t) + q1*e(t-T); need -2 < q1 < 0,
//	  q1: -0.75                  #   q0+q1 > 0 and q0-q1 < 4 (a stable loop)
//	  history: 4                 # 1..1000; periods averaged to predict arrivals
//	  refuse_periods: 3          # 1..1000; periods in reserve before an explicit 503
//	  log_length: 100            # requests in each class's response-level log
//	  merge: planned             # planned | per-request
//	  merge_gain: 0.1            # (0, 1]; the planned merge's gain per period
//	  seed: 1                    # of the actuator's random draws
//	  queue_timeout: 10s         # > refuse_periods x period; a safety net
//	  session_cookie: ""         # cookie naming sessions; "" = no session awareness
//	  transactional_paths: []    # "/x" or "/x*"; a session that requests one is never refused
//	  max_sessions: 100000       # sessions remembered
//	  session_idle: 30m          # idle sessions are forgotten when room is needed
//	  fallback: ""               # class of requests no rule matches; "" = the last class
//	  content: {trees: 1, a: 0, b: 0, target_utilization: 0.85, gain: 4,
//	            quality_gain: 0.1, tree_path: "/tree{tree}{path}", g_step: dispatch}
//	                             # M trees; U = a*R + b*W; a = b = 0: adaptation off;
//	                             # quality_gain (0, 1]: lower classes degrade first,
//	                             # negative: one quality for all classes;
//	                             # tree k < M is served from tree_path's path;
//	                             # g_step: G moves with each dispatch, or
//	                             # "period": one step a period (published law)
//	  classes:                   # default gold 3, silver 2, bronze 1 without rules
//	    - name: gold             # required, unique
//	      weight: 3              # required, > 0; target share = weight / sum
//	      target_queue: 0        # 0: feedback.target_queue
//	      queue_capacity: 1000   # admitted requests waiting
//	      reserve_capacity: 1000 # requests held back by the actuator
//	      hosts: []              # "x.example" or "*.example"
//	      paths: []              # "/x" or "/x*"
//	      subnets: []            # client prefixes, "198.18.1.0/24"
//	      cookies: []            # "name=value"
//
// Listeners with policy lifo-pri, eight-fifo or single-fifo classify each
// request by its path into classes (first exact pattern, else longest
// prefix, else the first class listed) instead of by Host into customers.
//
// testdata/example.yaml is a complete commented example;
// testdata/feedback.yaml one for a feedback listener.
//
// # Domains and Classify
//
// A domain is an exact host name ("a.example") or a wildcard whose whole
// leftmost label is "*" ("*.a.example"), which stands for exactly one
// label: it covers "www.a.example" but neither "a.example" nor
// "x.www.a.example". Domains are compared case-insensitively, with a
// trailing dot ignored; a domain may belong to one customer only. Classify
// tries the exact name first, then the wildcard, then falls back to the
// default customer.
//
// # The default customer
//
// scheduler.default_customer may name one of the customers, which then
// also receives every unmatched request. If it names none, Parse adds it
// at the end of File.Customers with Implicit set, no domains, reservation
// 0, no cap, weight 1 and the scheduler's queue capacity, and Check warns
// (when the file lists customers at all), in case the name was mistyped.
//
// # Paths
//
// Load reads relative control.key_file and capture paths relative to the
// configuration file's directory. Parse leaves them as written. The key
// itself is not read here: the daemon reads it with proto.LoadKey.
//
// # Warnings
//
// Check reports what parses but is probably wrong: reservations adding up
// to more than the estimated capacity (backends.expected x
// concurrency_cap / typical_service_time, e.g. 5 x 5 / 20ms = 1250 req/s)
// or reservations with that estimate impossible, a customer without
// domains, one with neither reservation nor cap, an implicit default
// customer, a listener other than credit
// while customers have reservations or caps, classes or lifo sections no
// listener uses, and a queue timeout shorter
// than the typical service time.
package conf
