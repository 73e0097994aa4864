package session

import "math"

// ModelStats are the figures a Model implies, derived exactly from its
// transition matrix as an absorbing Markov chain with Exit the only
// absorbing state (Kemeny and Snell): with Q the page-to-page block of
// Transitions, the fundamental matrix N = (I-Q)^-1 holds in N[i][j] the
// expected number of requests for page j in a session now on page i.
type ModelStats struct {
	// Visits[j] is the expected number of requests for page j in one
	// session (row Start of N).
	Visits [NumPages]float64
	// Length is the expected number of pages in a session: sum of Visits.
	Length float64
	// LengthVar is the variance of the number of pages in a session,
	// ((2N-I)t - t*t)[Start] with t = N*1.
	LengthVar float64
	// Mix[j] is the share of all requests that are for page j when many
	// sessions run (Visits/Length; also the stationary distribution of
	// the chain that restarts at Start on exit).
	Mix [NumPages]float64
	// Reach[j] is the probability that a session requests page j at
	// least once: N[Start][j]/N[j][j] (and 1 for Start itself).
	Reach [NumPages]float64
	// Transactional is the share of requests for login, shipping,
	// payment and confirm together.
	Transactional float64
}

// matrix is a square matrix over the page stages.
type matrix [NumPages][NumPages]float64

// Stats derives the model's figures. The model must pass Validate; for a
// chain in which some page cannot reach Exit the numbers are NaN.
func (m Model) Stats() ModelStats {
	var st ModelStats
	var iMinusQ matrix
	for i := range NumPages {
		for j := range NumPages {
			iMinusQ[i][j] = -m.Transitions[i][j]
		}
		iMinusQ[i][i]++
	}
	n, err := inverse(iMinusQ)
	if err != nil {
		nan := math.NaN()
		for j := range NumPages {
			st.Visits[j], st.Mix[j], st.Reach[j] = nan, nan, nan
		}
		st.Length, st.LengthVar, st.Transactional = nan, nan, nan
		return st
	}
	s := m.Start
	var t [NumPages]float64 // t[i]: expected pages left from page i
	for i := range NumPages {
		for j := range NumPages {
			t[i] += n[i][j]
		}
	}
	st.Visits = n[s]
	st.Length = t[s]
	second := 0.0 // ((2N - I) t)[s]
	for j := range NumPages {
		second += 2 * n[s][j] * t[j]
	}
	st.LengthVar = second - t[s] - t[s]*t[s]
	for j := range NumPages {
		st.Mix[j] = st.Visits[j] / st.Length
		st.Reach[j] = n[s][j] / n[j][j]
		if Stage(j).Transactional() {
			st.Transactional += st.Mix[j]
		}
	}
	st.Reach[s] = 1
	return st
}

// PageSuccess is the probability that one page is eventually served when
// each attempt independently times out with probability pTimeout: the user
// tries up to 1+Retries times and, after each timeout, leaves with
// probability AbandonProb.
func (m Model) PageSuccess(pTimeout float64) float64 {
	keepTrying := pTimeout * (1 - m.AbandonProb)
	success, reachAttempt := 0.0, 1.0
	for range m.Retries + 1 {
		success += reachAttempt * (1 - pTimeout)
		reachAttempt *= keepTrying
	}
	return success
}

// AbandonRate is the fraction of sessions that end by abandonment, not by
// Exit, when every request independently times out with probability
// pTimeout. With s = PageSuccess(pTimeout) and L the session length it is
// 1 - E[s^L], and E[s^L] = (s (I - sQ)^-1 r)[Start] with r the column of
// exit probabilities.
func (m Model) AbandonRate(pTimeout float64) float64 {
	s := m.PageSuccess(pTimeout)
	var a matrix
	for i := range NumPages {
		for j := range NumPages {
			a[i][j] = -s * m.Transitions[i][j]
		}
		a[i][i]++
	}
	inv, err := inverse(a)
	if err != nil {
		return math.NaN()
	}
	complete := 0.0
	for j := range NumPages {
		complete += inv[m.Start][j] * s * m.Transitions[j][Exit]
	}
	return 1 - complete
}

// inverse inverts a by Gauss-Jordan elimination with partial pivoting,
// which is exact enough for these small, diagonally dominant-ish systems.
func inverse(a matrix) (matrix, error) {
	var inv matrix
	for i := range NumPages {
		inv[i][i] = 1
	}
	for col := range NumPages {
		pivot := col
		for r := col + 1; r < NumPages; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[pivot][col]) {
				pivot = r
			}
		}
		if math.Abs(a[pivot][col]) < 1e-12 {
			return matrix{}, errSingular
		}
		a[col], a[pivot] = a[pivot], a[col]
		inv[col], inv[pivot] = inv[pivot], inv[col]
		scale := 1 / a[col][col]
		for j := range NumPages {
			a[col][j] *= scale
			inv[col][j] *= scale
		}
		for r := range NumPages {
			if r == col || a[r][col] == 0 {
				continue
			}
			f := a[r][col]
			for j := range NumPages {
				a[r][j] -= f * a[col][j]
				inv[r][j] -= f * inv[col][j]
			}
		}
	}
	return inv, nil
}
