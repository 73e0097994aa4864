package frontend

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/internal/exposition"
)

// The feedback policy's metrics (issue 10): per class the queue its loop
// holds against target_q, its proQoS against its target share and what
// became of its requests; globally the content adaptation's U and G.
// They come from Status.Feedback and are absent without a feedback
// listener.
var (
	fbQueue       = fam("qsplice_feedback_queue", "Admitted requests of the class waiting: q, which the loop holds at target_q.", isGauge, "class")
	fbReserve     = fam("qsplice_feedback_reserve", "Requests of the class the actuator holds back in its reserve queue.", isGauge, "class")
	fbTargetQueue = fam("qsplice_feedback_target_queue", "The queue length target_q the class's loop holds.", isGauge, "class")
	fbPass        = fam("qsplice_feedback_pass_probability", "Probability p = target_in / predicted arrivals with which the actuator passes a request this period.", isGauge, "class")
	fbProQoS      = fam("qsplice_feedback_pro_qos", "proQoS: the class's share of the quality delivered over its last log_length requests.", isGauge, "class")
	fbShare       = fam("qsplice_feedback_target_share", "The class's target share of the quality delivered: its weight over the sum of the weights.", isGauge, "class")
	fbArrived     = fam("qsplice_feedback_arrived_total", "Requests of the class that reached the policy.", isCounter, "class")
	fbDispatched  = fam("qsplice_feedback_dispatched_total", "Requests of the class dispatched to a back-end.", isCounter, "class")
	fbRefused     = fam("qsplice_feedback_refused_total", "Requests of the class answered 503 by the policy, by reason: loop (kept in reserve refuse_periods periods), overload (tree 0), full (queue or reserve full), expired (queue_timeout).", isCounter, "class", "reason")
	fbTrees       = fam("qsplice_feedback_trees_served_total", "Requests of the class dispatched per content tree (1..M, M full quality).", isCounter, "class", "tree")
	fbUtil        = fam("qsplice_feedback_utilization", "Utilization U = a*R + b*W of the last period.", isGauge)
	fbG           = fam("qsplice_feedback_g", "The content adaptor's G in [0, M]: clients get tree floor(G) or floor(G)+1.", isGauge)
	fbM           = fam("qsplice_feedback_trees", "Number of content trees M (full quality).", isGauge)
	fbSessions    = fam("qsplice_feedback_sessions", "Sessions the policy remembers.", isGauge)
	// Sessions beyond capacity and per-class quality (issue 10).
	fbPassSession       = fam("qsplice_feedback_pass_probability_session", "p for requests of known sessions: below 1 only when they alone exceed target_in.", isGauge, "class")
	fbPassTransactional = fam("qsplice_feedback_pass_probability_transactional", "p for requests of sessions in a transactional stage: below 1 only when they alone exceed target_in.", isGauge, "class")
	fbClassG            = fam("qsplice_feedback_class_g", "The class's own G (lower classes are degraded first so that proQoS keeps the weights' shares).", isGauge, "class")
	fbDisplaced         = fam("qsplice_feedback_displaced_total", "Known-session requests due for refusal admitted in place of a new session's, which was refused instead.", isCounter, "class")
	fbCompletions       = fam("qsplice_feedback_completions_total", "Completions the back-ends reported: R is their rate.", isCounter)
	fbResponseBytes     = fam("qsplice_feedback_response_bytes_total", "Response bytes of the completions reported: W is their rate.", isCounter)

	feedbackFamilies = []*exposition.Family{&fbQueue, &fbReserve, &fbTargetQueue, &fbPass, &fbProQoS, &fbShare,
		&fbArrived, &fbDispatched, &fbRefused, &fbTrees, &fbUtil, &fbG, &fbM, &fbSessions,
		&fbPassSession, &fbPassTransactional, &fbClassG, &fbDisplaced, &fbCompletions, &fbResponseBytes}
)

// collectFeedback emits the feedback families from fb (nothing when nil).
func collectFeedback(ch chan<- prometheus.Metric, fb *controller.FeedbackStatus) {
	if fb == nil {
		return
	}
	fbUtil.Emit(ch, fb.U)
	fbG.Emit(ch, fb.G)
	fbM.Emit(ch, float64(fb.Trees))
	fbSessions.Emit(ch, float64(fb.Sessions))
	fbCompletions.Emit(ch, float64(fb.Completions))
	fbResponseBytes.Emit(ch, float64(fb.Bytes))
	for i := range fb.Classes {
		c := &fb.Classes[i]
		fbQueue.Emit(ch, float64(c.Queued), c.Name)
		fbReserve.Emit(ch, float64(c.Reserve), c.Name)
		fbTargetQueue.Emit(ch, float64(c.TargetQueue), c.Name)
		fbPass.Emit(ch, c.PassProbability, c.Name)
		fbProQoS.Emit(ch, c.ProQoS, c.Name)
		fbShare.Emit(ch, c.Share, c.Name)
		fbPassSession.Emit(ch, c.PassSession, c.Name)
		fbPassTransactional.Emit(ch, c.PassTransactional, c.Name)
		fbClassG.Emit(ch, c.G, c.Name)
		fbDisplaced.Emit(ch, float64(c.Displaced), c.Name)
		fbArrived.Emit(ch, float64(c.Arrived), c.Name)
		fbDispatched.Emit(ch, float64(c.Dispatched), c.Name)
		fbRefused.Emit(ch, float64(c.Refused), c.Name, "loop")
		fbRefused.Emit(ch, float64(c.Overload), c.Name, "overload")
		fbRefused.Emit(ch, float64(c.Full), c.Name, "full")
		fbRefused.Emit(ch, float64(c.Expired), c.Name, "expired")
		for tree := 1; tree < len(c.Trees); tree++ { // 0 is a refusal, never served
			fbTrees.Emit(ch, float64(c.Trees[tree]), c.Name, strconv.Itoa(tree))
		}
	}
}
