package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/lab"
)

// TestRefusedFollowUpGetsAnAnswerInItsStream: a keep-alive client over
// its cap is refused a follow-up request on a connection that is already
// spliced to a back-end. It gets a whole 429 response on that very
// connection, after the complete previous response, then an orderly close:
// never a reset (kernel TCP on both ends, the answer from the front-end's
// own stack with the back-end's sequence space continued).
func TestRefusedFollowUpGetsAnAnswerInItsStream(t *testing.T) {
	l := creditLabWith(t, 1, 2, 5*time.Millisecond, []lab.Customer{
		{Name: "Z", Domains: []string{"z.example"}, Reservation: 2, Cap: 3},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refusedInStream := 0
	for attempt := 0; attempt < 5 && refusedInStream == 0; attempt++ {
		c, err := l.Dial(ctx, "c1", "tcp", net.JoinHostPort(lab.VIP, "8080"))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		var statuses []int
		for i := 0; i < 20; i++ {
			req := "GET /data/100K HTTP/1.1\r\nHost: z.example\r\n\r\n"
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatalf("request %d: %v (statuses so far %v)", i, err, statuses)
			}
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("request %d on one connection: %v (statuses so far %v): a refusal must not reset the stream", i, err, statuses)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("request %d body: %v", i, err)
			}
			statuses = append(statuses, resp.StatusCode)
			if resp.StatusCode == 200 {
				if len(body) != 100<<10 {
					t.Fatalf("request %d: %d body bytes, want %d", i, len(body), 100<<10)
				}
				continue
			}
			if resp.StatusCode != 429 || !resp.Close || !strings.Contains(string(body), "over-cap") {
				t.Fatalf("request %d: status %d, close %v, body %q", i, resp.StatusCode, resp.Close, body)
			}
			if i > 0 {
				refusedInStream++
			}
			// The front-end closes after its answer: an orderly FIN.
			if n, err := r.ReadByte(); err != io.EOF {
				t.Fatalf("after the 429: read %v, %v; want EOF (FIN), not more bytes or a reset", n, err)
			}
			break
		}
		c.Close()
		t.Logf("attempt %d: statuses %v", attempt, statuses)
	}
	if refusedInStream == 0 {
		t.Fatal("no follow-up request was refused: the test did not exercise the in-stream answer")
	}
	st := frontendStatus(t, l)
	if st.Engine.FollowUpsRefused == 0 {
		t.Errorf("engine counted %d follow-ups refused in stream, %d reset", st.Engine.FollowUpsRefused, st.Engine.FollowUpsReset)
	}
	if st.Engine.FollowUpsReset != 0 {
		t.Errorf("%d refused follow-ups were reset", st.Engine.FollowUpsReset)
	}
}
