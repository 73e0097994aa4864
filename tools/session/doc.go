// Package session is the client side of the online-shop workload used by
// the LIFO-Pri overload experiment (docs/architecture.md §6, issue 4): a
// Markov model of user sessions over eight page classes, the clients'
// think times and impatience, and the httperf --wsesslog files that carry
// generated sessions to httperf and to replay.
//
// Where it sits: nothing here touches the network or the clock. The
// simulator and the load generator (tools/loadgen) create one Session per
// simulated user with their own seeded math/rand/v2 generator, send the
// pages it asks for through the front-end, whose sched package classifies
// them by path (Stage.Path) into the 4 browsing and 4 transaction queues,
// and report timeouts back to it.
//
// # The session model
//
// A session starts at main and moves between pages until it reaches exit.
// The matrix of DefaultModel follows the shape of the TPC-W-like shopping
// model of the LIFO-Pri work (the published slides are not at hand, so
// the numbers are chosen to match its description): most users browse
// (main to browse or search, browse and details back and forth, search to
// details), a minority log in and go through shipping, payment and
// confirm, and every page has a way out. Rows are "from", columns "to":
//
//	from \ to   main browse search details login shipping payment confirm exit
//	main          .    .50    .35    .05    .02     .       .       .     .08
//	browse       .05   .25    .10    .50     .      .       .       .     .10
//	search        .    .10    .20    .60     .      .       .       .     .10
//	details      .05   .40    .28    .11    .05     .       .       .     .11
//	login        .05   .10     .      .      .     .65      .       .     .20
//	shipping      .     .      .     .05     .      .      .80      .     .15
//	payment       .     .      .      .      .     .05      .      .85    .10
//	confirm      .10   .10     .      .      .      .       .       .     .80
//
// What it implies, computed by Model.Stats (absorbing-chain algebra,
// checked by TestDefaultModelStats):
//
//	page      visits/session  request mix  sessions reaching it
//	main          1.294          14.1%          100%
//	browse        2.679          29.1%          77.2%
//	search        1.905          20.7%          68.6%
//	details       2.868          31.2%          76.9%
//	login         0.169           1.8%          16.2%
//	shipping      0.115           1.2%          10.8%
//	payment       0.092           1.0%           8.7%
//	confirm       0.078           0.85%          7.7%
//
// A session is 9.20 pages long on average (standard deviation 8.2);
// transactional pages are 4.9% of requests; 7.7% of sessions buy.
//
// # Think time and impatience
//
// Think time is exponential with a 7 s mean, the TPC-W emulated browser's
// think time. Each request's patience is exponential with an 8 s mean,
// after the "8-second rule" for how long web users wait for a page. After
// a timeout the user leaves with probability 0.5, and otherwise retries,
// at most twice per page; after the third timeout on the same page the
// user leaves. Model.PageSuccess and Model.AbandonRate give the resulting
// completion figures for a given per-request timeout probability.
//
// # Session files
//
// ReadWsesslog and WriteWsesslog read and write the httperf --wsesslog
// format; Generate turns the model into such sessions so httperf can
// play them.
package session
