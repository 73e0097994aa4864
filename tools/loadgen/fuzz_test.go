package loadgen

import (
	"math"
	"testing"
)

// FuzzParseStream: a stream flag either fails or gives a named stream
// with a finite positive rate below the bound.
func FuzzParseStream(f *testing.F) {
	for _, s := range []string{"name=A,rate=10", "name=A,host=a.example,rate=1000,path=/data/1K?service=40ms,arrival=constant",
		"name=A,rate=0", "rate=1", "name=A,rate=1e9", "name=A,rate=NaN", "name=A,rate=1,rate=2", "name=,rate=1", "="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStream(s)
		if err != nil {
			return
		}
		if st.Name == "" || !(st.Rate > 0) || st.Rate > maxRate || math.IsInf(st.Rate, 0) || st.Path == "" {
			t.Fatalf("%q parsed to %+v", s, st)
		}
	})
}

// FuzzParseSessions: a -sessions flag either fails or gives a usable
// model: positive finite rate, probabilities in [0, 1], non-negative
// times and counts.
func FuzzParseSessions(f *testing.F) {
	for _, s := range []string{"rate=1", "rate=2.5,think=1s,timeout=8s,retries=2,abandon=0.5,count=10,refused=leave",
		"rate=0", "rate=1,abandon=2", "rate=1,think=-1s", "rate=1,refused=maybe", "think=1s", "rate=Inf", "rate=1,rate=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSessions(s)
		if err != nil {
			return
		}
		m := sp.Model
		if !(sp.Rate > 0) || math.IsInf(sp.Rate, 0) || sp.Count < 0 || m.ThinkMean < 0 || m.TimeoutMean < 0 ||
			m.Retries < 0 || !(m.AbandonProb >= 0 && m.AbandonProb <= 1) {
			t.Fatalf("%q parsed to %+v", s, sp)
		}
	})
}
