package replay

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/qsplice/qsplice/splice"
)

// Summary counts what a replay did. Maps are keyed by name so that their
// JSON form is sorted and stable.
type Summary struct {
	FramesIn        uint64 `json:"frames_in"`               // records read from the capture
	FramesFed       uint64 `json:"frames_fed"`              // of those, given to the engine
	FramesIgnored   uint64 `json:"frames_ignored"`          // the old system's output, other hosts' traffic
	ClientRewritten uint64 `json:"client_frames_rewritten"` // client frames moved onto our ISN (see package doc)
	ClientUnmapped  uint64 `json:"client_frames_unmapped"`  // client frames fed unchanged: no SYN-ACK of ours known
	FramesOut       uint64 `json:"frames_out"`              // frames the engine sent
	BackendFrames   uint64 `json:"backend_frames"`          // frames the simulated back-ends sent

	Requests        uint64 `json:"requests"` // request heads parsed
	HandoffsStarted uint64 `json:"handoffs_started"`
	HandoffsDone    uint64 `json:"handoffs_done"`
	HandoffsFailed  uint64 `json:"handoffs_failed"`
	Retransmits     uint64 `json:"retransmits"`
	ARPReplies      uint64 `json:"arp_replies"`
	DispatchErrors  uint64 `json:"dispatch_errors"`   // Dispatch refused an EvRequest
	SpliceAckErrors uint64 `json:"splice_ack_errors"` // SpliceAcked came after the flow moved on

	Answers map[string]uint64 `json:"answers"` // front-end's own answers by HTTP status
	Closed  map[string]uint64 `json:"closed"`  // flows ended, by reason
	Drops   map[string]uint64 `json:"drops"`   // engine drops by reason (non-zero only)

	StartNS int64 `json:"start_ns"` // engine time of the first step (Unix ns)
	EndNS   int64 `json:"end_ns"`   // engine time of the last step
}

func newSummary() Summary {
	return Summary{Answers: map[string]uint64{}, Closed: map[string]uint64{}, Drops: map[string]uint64{}}
}

// finish copies the engine's own counters.
func (s *Summary) finish(st splice.FrontEndStats) {
	s.Requests = st.Requests
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
	_, err := fmt.Fprintf(w, `frames in    %d (fed %d, ignored %d; client frames rewritten %d, unmapped %d)
frames out   %d from the engine, %d from simulated back-ends
requests     %d
handoffs     %d started, %d done, %d failed (dispatch errors %d, late splice acks %d)
answers      %s
closed       %s
drops        %s
retransmits  %d
arp replies  %d
engine time  %s .. %s (%v)
`,
		s.FramesIn, s.FramesFed, s.FramesIgnored, s.ClientRewritten, s.ClientUnmapped,
		s.FramesOut, s.BackendFrames,
		s.Requests,
		s.HandoffsStarted, s.HandoffsDone, s.HandoffsFailed, s.DispatchErrors, s.SpliceAckErrors,
		counts(s.Answers), counts(s.Closed), counts(s.Drops),
		s.Retransmits, s.ARPReplies,
		start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano), end.Sub(start))
	return err
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
