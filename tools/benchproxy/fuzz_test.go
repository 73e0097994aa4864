package benchproxy

import (
	"strings"
	"testing"
)

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("4242 (nginx: worker (x) ) S 4200 4200 4200 0 -1 4194624 1000 0 0 0 1234 567 0 0 20 0"))
	f.Add([]byte("1 ()) R 0 1 1 0 -1 0 0 0 0 0 0 0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseProcStat(data)
		if err != nil {
			return
		}
		// The comm is what stands between the first '(' and the last ')'.
		if !strings.Contains(string(data), "("+s.Comm+")") {
			t.Errorf("comm %q is not in %q", s.Comm, data)
		}
		if !strings.Contains(string(data), ") "+string([]byte{s.State})) {
			t.Errorf("state %q does not follow the comm in %q", s.State, data)
		}
	})
}

func FuzzParseWrk(f *testing.F) {
	f.Add(wrkOutput)
	f.Add("qsplice-bench-wrk requests=1 bytes=2 duration_us=3 connect=0 read=0 write=0 status=0 timeout=0 p50_us=1 p99_us=2")
	f.Fuzz(func(t *testing.T, out string) {
		w, err := ParseWrk(out)
		if err != nil {
			return
		}
		for _, n := range []int64{w.Requests, w.Bytes, w.ErrConnect, w.ErrRead, w.ErrWrite, w.ErrStatus, w.ErrTimeout, int64(w.LatencyP50), int64(w.LatencyP99)} {
			if n < 0 {
				t.Errorf("negative count in %+v from %q", w, out)
			}
		}
		if w.Duration <= 0 {
			t.Errorf("duration %v from %q", w.Duration, out)
		}
	})
}

func FuzzParsePerfStat(f *testing.F) {
	f.Add("4183225,,raw_syscalls:sys_enter,2234227,100.00,,\n98,,g:m,1,100.00,,\n")
	f.Add("<not counted>,,g:m,0,100.00,,")
	f.Fuzz(func(t *testing.T, out string) {
		counts, err := ParsePerfStat(out)
		if err != nil {
			return
		}
		for name := range counts {
			if name == "" || !strings.Contains(out, name) {
				t.Errorf("event %q not in the input", name)
			}
		}
	})
}

func FuzzParseOffloads(f *testing.F) {
	f.Add(ethtoolShow)
	f.Fuzz(func(t *testing.T, show string) {
		o, err := ParseOffloads(show)
		if err != nil {
			return
		}
		// What parsed renders and parses back the same.
		var b strings.Builder
		for i, feat := range offloadFeatures {
			v := "off"
			if *o.field(i) {
				v = "on"
			}
			b.WriteString(feat.show + ": " + v + "\n")
		}
		back, err := ParseOffloads(b.String())
		if err != nil || back != o {
			t.Errorf("%+v rendered as %q parsed back as %+v, %v", o, b.String(), back, err)
		}
	})
}

func FuzzParsePerfStacks(f *testing.F) {
	f.Add(perfStacksOutput)
	f.Add(" 1 \n\tffffffff81eb094e net_rx_action\n\tffffffff8223c951 do_syscall_64\n")
	f.Fuzz(func(t *testing.T, out string) {
		counts, err := ParsePerfStacks(out)
		if err != nil {
			return
		}
		// Every sample starts at a line that is neither blank nor a
		// frame, and no sample delivers more than once.
		headers := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.TrimSpace(line) != "" && line[0] != '\t' {
				headers++
			}
		}
		total := 0
		for pid, c := range counts {
			if pid < 0 || c.Samples <= 0 || c.Delivering < 0 || c.Delivering > c.Samples {
				t.Errorf("pid %d: %+v from %q", pid, c, out)
			}
			total += c.Samples
		}
		if total != headers {
			t.Errorf("%d samples counted, %d headers in %q", total, headers, out)
		}
	})
}
