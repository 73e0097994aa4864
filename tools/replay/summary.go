package replay

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/splice"
)

// Summary counts what a replay did. Maps are keyed by name so that their
// JSON form is sorted and stable.
type Summary struct {
	VIP             string `json:"vip"`                     // the VIP replayed for (given, or learned from a SYN)
	FramesIn        uint64 `json:"frames_in"`               // records read from the capture
	FramesFed       uint64 `json:"frames_fed"`              // of those, given to the engine
	FramesIgnored   uint64 `json:"frames_ignored"`          // the old system's output, other hosts' traffic
	ClientRewritten uint64 `json:"client_frames_rewritten"` // client frames moved onto our ISN (see package doc)
	ClientUnmapped  uint64 `json:"client_frames_unmapped"`  // client frames fed unchanged: no SYN-ACK of ours known
	FramesOut       uint64 `json:"frames_out"`              // frames the engine sent
	BackendFrames   uint64 `json:"backend_frames"`          // frames the simulated back-ends sent

	Requests        uint64 `json:"requests"`   // request heads parsed, follow-ups included
	FollowUps       uint64 `json:"follow_ups"` // of those, on a spliced keep-alive connection
	HandoffsStarted uint64 `json:"handoffs_started"`
	HandoffsDone    uint64 `json:"handoffs_done"`
	HandoffsFailed  uint64 `json:"handoffs_failed"`
	Retransmits     uint64 `json:"retransmits"`
	ARPReplies      uint64 `json:"arp_replies"`
	// HandedOver counts the requests the scheduler sent to a back-end
	// (first requests dispatched, follow-ups admitted); NotHandedOver
	// those it refused, expired, or dropped because the client left.
	HandedOver    uint64 `json:"handed_over"`
	NotHandedOver uint64 `json:"not_handed_over"`
	// Customers are the scheduler's counts per customer (per class on
	// class-based listeners).
	Customers map[string]CustomerSummary `json:"customers"`

	Answers map[string]uint64 `json:"answers"` // front-end's own answers by HTTP status
	Closed  map[string]uint64 `json:"closed"`  // flows ended, by reason
	Drops   map[string]uint64 `json:"drops"`   // engine drops by reason (non-zero only)

	StartNS int64 `json:"start_ns"` // engine time of the first step (Unix ns)
	EndNS   int64 `json:"end_ns"`   // engine time of the last step
}

// CustomerSummary is one customer's requests as the scheduler saw them.
type CustomerSummary struct {
	Offered  uint64            `json:"offered"`
	Admitted uint64            `json:"admitted"` // handed to a back-end
	Served   uint64            `json:"served"`   // reported served by its shim
	Rejected map[string]uint64 `json:"rejected,omitempty"`
	// Abandoned: the client left while the request waited.
	Abandoned uint64 `json:"abandoned,omitempty"`
}

func newSummary() Summary {
	return Summary{Answers: map[string]uint64{}, Closed: map[string]uint64{}, Drops: map[string]uint64{},
		Customers: map[string]CustomerSummary{}}
}

// finish copies the engine's and the scheduler's own counters.
func (s *Summary) finish(st splice.FrontEndStats, cs controller.Status) {
	for _, c := range cs.Customers {
		if c.Offered == 0 {
			continue
		}
		cu := CustomerSummary{Offered: c.Offered, Admitted: c.Admitted, Served: c.Served, Abandoned: c.Abandoned}
		for reason, n := range c.Rejected {
			if n > 0 {
				if cu.Rejected == nil {
					cu.Rejected = map[string]uint64{}
				}
				cu.Rejected[reason] = n
			}
		}
		s.Customers[c.Name] = cu
		s.HandedOver += c.Admitted
		s.NotHandedOver += c.Offered - c.Admitted
	}
	s.Requests = st.Requests
	s.FollowUps = st.FollowUps
	s.HandoffsStarted = st.HandoffsStarted
	s.HandoffsDone = st.HandoffsDone
	s.HandoffsFailed = st.HandoffsFailed
	s.Retransmits = st.Retransmits
	s.ARPReplies = st.ARPReplies
	for i, n := range st.Drops {
		if n != 0 {
			s.Drops[splice.DropReasonName(i)] = n
		}
	}
}

// WriteText writes the summary for people, one topic a line.
func (s *Summary) WriteText(w io.Writer) error {
	start, end := time.Unix(0, s.StartNS).UTC(), time.Unix(0, s.EndNS).UTC()
	_, err := fmt.Fprintf(w, `vip          %s
frames in    %d (fed %d, ignored %d; client frames rewritten %d, unmapped %d)
frames out   %d from the engine, %d from simulated back-ends
requests     %d (%d follow-ups); handed to a back-end %d, not %d
customers    %s
handoffs     %d started, %d done, %d failed
answers      %s
closed       %s
drops        %s
retransmits  %d
arp replies  %d
engine time  %s .. %s (%v)
`,
		s.VIP,
		s.FramesIn, s.FramesFed, s.FramesIgnored, s.ClientRewritten, s.ClientUnmapped,
		s.FramesOut, s.BackendFrames,
		s.Requests, s.FollowUps, s.HandedOver, s.NotHandedOver,
		customers(s.Customers),
		s.HandoffsStarted, s.HandoffsDone, s.HandoffsFailed,
		counts(s.Answers), counts(s.Closed), counts(s.Drops),
		s.Retransmits, s.ARPReplies,
		start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano), end.Sub(start))
	return err
}

// customers formats the per-customer counts, in name order.
func customers(m map[string]CustomerSummary) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		c := m[n]
		parts[i] = fmt.Sprintf("%s: %d offered, %d handed over, %d served", n, c.Offered, c.Admitted, c.Served)
		if len(c.Rejected) > 0 {
			parts[i] += " (refused " + counts(c.Rejected) + ")"
		}
	}
	return strings.Join(parts, "; ")
}

// counts formats a map as "k: v" pairs in key order, or "none".
func counts(m map[string]uint64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
