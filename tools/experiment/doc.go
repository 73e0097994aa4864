// Package experiment is a deterministic discrete-event simulation of the
// published LIFO-Pri e-commerce experiment (design.md section 6, issue
// 4): shop sessions from tools/session, a front-end running the very
// sched.LifoPri policy the real front-end runs, and a cluster of back-end
// slots, swept over offered load for the three policies the publication
// compares (single FIFO queue, eight FIFO queues, eight queues LIFO-Pri).
//
// Where it sits: off the data path. Nothing here touches the network or
// the wall clock; it stands in for the lab run of the same experiment
// (tools/loadgen against the front-end) so that the policy's behaviour
// under overload can be checked in seconds. cmd/qsplice-experiment runs
// the sweep and writes CSV, JSON and PNG plots (make experiment).
//
// # The model
//
// Cluster: Backends x SlotsPerBackend = 5 x 5 slots, as in the
// publication's cluster. A slot serves one request; service times are
// exponential with a mean per page class (DefaultConfig):
//
//	main 150 ms, browse 200 ms, search 300 ms, details 200 ms,
//	login 400 ms, shipping 400 ms, payment 500 ms, confirm 600 ms
//
// Transactions cost two to three times a browsing page (database
// writes). Over the session model's request mix the mean is 226 ms, so
// capacity = 25 / 0.226 s = 110.5 req/s (Config.Capacity).
//
// Front-end: one sched.LifoPri in the chosen mode with DefaultClasses
// (queues of 50 browsing and 25 transaction requests, 100 in the single
// FIFO) and the default 95%/85% hysteresis; a request is dispatched to any
// free slot in the policy's order. Every UtilInterval = 10 s the
// utilization from a sched.UtilizationMeter (fed with Start/Done at
// dispatch and completion) goes to SetUtilization. 10 s rather than 1 s
// because this cluster completes ~100 req/s, not the publication's 1250:
// 10 s gives the same ~1000 completions per interval the 10-point
// hysteresis gap was sized for (see sched.DefaultLifoLower); with 1 s the
// switch flapped on noise at 0.8-0.9 load.
//
// Clients: new sessions arrive as a Poisson process at rate Load x
// Capacity / 9.20 (the model's expected session length), so offered load
// L means L x capacity requests per second if no session ended early.
// Each session follows session.DefaultModel: request a page, wait for it
// at most an exponential patience (mean 8 s), think (exponential, mean
// 7 s), next page. After a timeout the user retries at once (the old
// request stays queued: the server does not know) or leaves, as
// Session.TimedOut decides (leave with probability 0.5, at most two
// retries per page). A request the server completes after its client
// gave up is wasted work (Result.Wasted). A request refused by a full
// queue (ErrQueueFull) is answered at once and the user leaves the shop:
// the session ends, as an error page ends most real visits.
//
// Every session draws from its own generator seeded by (Seed, session
// number), and arrivals from another, so the three policies see exactly
// the same users, think times, patience and service times; only what the
// policy does with them differs. Same seed, same bytes.
//
// # What is counted
//
// Sessions arriving in [Warmup, Duration) = [60 s, 600 s) are counted and
// followed to their end (arrivals go on meanwhile, so the counted ones
// never see an emptying system). Each attempt they send (first tries and
// retries) is exactly one of completed (in time), timed out or dropped.
// "Not generated" counts the pages a session that left (timeout or drop)
// would still have asked for: its Markov walk is continued from the page
// it left on, without sending, until Exit. The four add up to every
// request the sessions would have generated, and the percentages are of
// that sum. Throughput is requests completed in time per second of the
// window. Response time is the front-end's view, dispatch-queue entry to
// end of service, over every served attempt, wasted ones included.
//
// # Results against the publication
//
// At load 1.4, seed 1, 600 s (what qsplice-experiment prints):
//
//	policy       completed  timed out  dropped  not gen.  confirm done
//	single-fifo     64.2%      5.9%      0.7%     29.1%       342
//	eight-fifo      63.1%      6.8%      0.3%     29.9%       413
//	lifo-pri        67.5%      4.1%      1.4%     27.0%       429
//
// The publication has single FIFO at about 30% and LIFO-Pri at about
// 57%, with 6-7x more confirm pages. The direction is reproduced
// (LIFO-Pri completes most, wastes least, and completes 1.25x the
// confirms of single FIFO), the size is not. Tuning the documented
// parameters over wide ranges (patience 0.5-8 s, service means x0.1-x1
// of 0.6-2.5 s, 1-5 slots per back-end, think 2-7 s, abandonment
// probability 0.1-0.5) never put LIFO-Pri's lead at 1.4 past 6 points
// or its confirm ratio past 1.4x; the only settings that brought single
// FIFO near 30% (patience of 0.5-2 s against service of 0.1-1 s) did so
// at load 0.5 too, and for LIFO-Pri alike, so they model impatient users,
// not overload. The defaults therefore keep the values with outside
// grounding (8 s patience, 7 s think time) and plausible page costs,
// and ours differ because:
//
//   - The sessions shed load very efficiently. Every failed page ends the
//     session half of the time and takes its remaining ~8 pages with it,
//     so a few percent of failed requests bring the generated load down
//     to about capacity; "not generated" is 27-30% for every policy and
//     no policy can complete more than 1/1.4 = 71%.
//   - With the load thus throttled the queues stay short against the
//     clients' patience. The single FIFO queue holds 100 requests, four
//     mean service times of the 25 slots (~0.9 s), against 8 s of
//     patience: FIFO cannot make every client wait past its patience, so
//     it wastes little (5.9% timed out) and LIFO has little to save.
//   - Getting the publication's 30% needs FIFO to spend about half the
//     cluster on requests already abandoned, i.e. waits of the order of
//     the patience with per-page success near 60% (0.6^-4 ~ 7 is also
//     what a 6-7x confirm ratio over a four-page checkout implies). That
//     takes either much deeper queueing than the front-end's bounded
//     queues (back-ends that accept many connections and share the CPU,
//     kernel listen queues) or clients that keep retrying instead of
//     leaving; neither is part of the experiment as design.md describes it.
//
// Below capacity the policies agree: up to 0.9 the mean response times
// are within 1% and the browsing queues stayed FIFO for the default seed
// (other seeds see LIFO in up to 4% of the intervals at 0.9, when a burst
// keeps the cluster above 95% for ten seconds). Above capacity LIFO-Pri's
// mean response time over served requests is the highest near 1.3-1.5,
// because the oldest browsing requests starve at the bottom of LIFO
// queues and are eventually served very late (the long tail of
// rt_ccdf_1.47.png), while most requests are served much faster than
// under FIFO.
//
// # In the live lab
//
// RunLab (cmd/qsplice-experiment -lab, make experiment-lab) runs the same
// experiment on the real system; unlike the rest of this package it
// builds network namespaces and runs for real time. For each policy it
// builds a lab (package tools/lab) of Backends back-ends whose
// qsplice-testserver -shop answers the eight pages after exponential
// service times with the model's means, behind their shims, and a
// front-end whose listeners use the policy with the default classes and
// queues and the model's utilization interval, with concurrency cap
// SlotsPerBackend (the simulator's slots: the test server's service time
// is a wait, so only the cap bounds it). For each load, qsplice-load
// plays the model's sessions from the lab's client at the simulator's
// session rate, with refused=leave (a 503 ends the session, as a drop
// does here) and a drain that follows the counted sessions after the
// window while arrivals go on. Its counts (not generated included, see
// tools/loadgen) become a Result in model time, printed next to the
// simulator's run of the same policy, load, seed and window; lab.csv,
// lab.json and sim.csv keep both and the front-end's per-class counters.
// -timescale F multiplies every model time (service means, think time,
// patience, utilization interval) by F: the lab then runs 1/F times as
// fast at 1/F times the request rate, and reports rates x F and times / F.
// Lab times not given default to 60 s of warm-up, 120 s counted and 60 s
// of drain, of model time (x F).
//
// make experiment-lab (timescale 0.5: 30 s warm-up, 60 s counted, up to
// 30 s drain per load, 12 minutes in all) measured at load 1.4, seed 1,
// the simulator's rows being its run of the same window (60 s + 120 s of
// model time, so noisier than the 600 s table above):
//
//	policy       run  completed timed out   dropped  not gen.    failed    req/s  mean RT
//	single-fifo  lab      71.1%      5.7%      0.1%     23.1%      0.0%    101.0    0.42s
//	single-fifo  sim      65.5%      5.9%      0.8%     27.9%      0.0%    102.3    0.69s
//	eight-fifo   lab      71.0%      5.9%      0.0%     23.0%      0.0%    100.7    0.45s
//	eight-fifo   sim      65.0%      6.9%      0.2%     27.8%      0.0%    101.1    0.78s
//	lifo-pri     lab      71.8%      4.9%      0.6%     22.7%      0.0%    101.9    0.35s
//	lifo-pri     sim      67.9%      4.3%      1.3%     26.5%      0.0%    103.8    1.12s
//
// Confirm pages completed: single-fifo 67 in the lab and 72 in the
// simulator, eight-fifo 75 and 83, lifo-pri 83 and 88. The lab counted
// 1951 sessions, of which 236-237 were cut unfinished by the drain's
// end; the simulator 1993.
//
// At load 0.7 lab and simulator agree within the noise of a two-minute
// window (completed 87-89% against 90%, timed out 2.4-2.8% against 2.5%,
// mean response 0.21-0.22 s against 0.23 s, no drops, LIFO never on).
// The cluster's throughput agrees at 1.4 too (101-102 against 101-104
// req/s of model time): the handoff's own cost per request (the C2
// handshake) is small against service times of 75-300 ms. The ordering
// of the policies is the simulator's, LIFO-Pri completing the most and
// 1.24x single FIFO's confirm pages (1.22x in the simulator), though in
// the lab the differences between policies are within a point and a
// run this short cannot rank them.
//
// At 1.4 the lab completes 4-6 points more than the simulator, drops
// less and answers faster, and fewer sessions leave (less not
// generated). The main reason is a difference of model: the simulated
// front-end never learns that a client gave up, so every timed-out
// request is still served (Wasted equals TimedOut for the FIFO
// policies, 1117 requests for single-fifo), while in the lab a client
// that gives up closes its connection; the front-end then skips its
// request when its turn in the queue comes (the engine's Dispatch finds
// the connection gone), and a request in service ends when the close reaches
// the test server. The lab's front-end offered single-fifo 24522 requests
// over the run and served 23377 with 23 refused: the ~1100 others were
// abandoned ones that cost the back-ends nothing. That capacity goes to
// live requests, so queues are shorter, about as many requests time out
// (4.9-5.9% against 4.3-6.9%) but fewer meet a full queue, responses
// come 1.6-3x faster, and fewer sessions end early. For the same reason the
// cluster's utilization stays nearer the 95% threshold, and LIFO-Pri's
// browsing queues were LIFO in half of the samples against 92% of the
// simulator's intervals. Two smaller effects: the lab counts a session
// only until its drain ends, and the 12% of sessions still going then
// (the longest ones) lose their later pages from every count, which
// lowers the per-class counts and nudges the shares; and the lab's
// session arrivals come from qsplice-load's own random stream (1951
// sessions counted against the simulator's 1993), so its users are not
// the simulator's. The publication's 30% against 57% is no nearer in
// the lab than in the simulator: cancelled work makes FIFO's waste, the
// effect LIFO-Pri corrects, even smaller.
package experiment
