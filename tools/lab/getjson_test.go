package lab

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// GetJSON decodes a 200 answer and hands back its body; a refusal, a
// page that is not JSON and a page past the bound are errors that name
// the URL.
func TestGetJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			w.Write([]byte(`{"registered": true}`))
		case "/busy":
			http.Error(w, "not now", http.StatusServiceUnavailable)
		case "/text":
			w.Write([]byte("registered"))
		case "/huge":
			w.Write([]byte(`"` + strings.Repeat("x", maxStatusBytes) + `"`))
		}
	}))
	t.Cleanup(srv.Close)
	var st struct {
		Registered bool `json:"registered"`
	}
	body, err := GetJSON(context.Background(), srv.Client(), srv.URL+"/status", &st)
	if err != nil || !st.Registered || string(body) != `{"registered": true}` {
		t.Errorf("/status: %+v, body %q, %v", st, body, err)
	}
	for path, want := range map[string]string{"/busy": "503 Service Unavailable", "/text": "invalid character", "/huge": "larger than"} {
		var v any
		_, err := GetJSON(context.Background(), srv.Client(), srv.URL+path, &v)
		if err == nil || !strings.Contains(err.Error(), "GET "+srv.URL+path+": ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming the URL and %q", path, err, want)
		}
	}
}
