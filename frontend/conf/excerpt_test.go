package conf

import (
	"strings"
	"testing"
)

// TestErrorsQuoteExcerpts: a key or value of kilobytes comes back in the
// error as a short excerpt, while the package's own text (the list of
// known keys) stays whole.
func TestErrorsQuoteExcerpts(t *testing.T) {
	blob := strings.Repeat("blob ", 10000)
	for _, src := range []string{
		blob + "\n", // the document is a scalar
		"tcp: {" + strings.Repeat("lingr", 150) + ": 1s}\n", // an unknown key
		"tcp: {linger: " + blob + "}\n",                     // a value that is no duration
		"link: {interface: \"" + blob + "\"}\n",             // a value that is no interface name
	} {
		_, err := Parse("front.yaml", []byte(src))
		if err == nil {
			t.Fatalf("%.40q...: parsed", src)
		}
		msg := err.Error()
		if strings.Count(msg, "blob") > 20 || len(msg) > 2000 {
			t.Errorf("%.40q...: error of %d bytes quotes the blob: %.300s", src, len(msg), msg)
		}
		if !strings.Contains(msg, "...") {
			t.Errorf("%.40q...: error %q does not show where it cut", src, msg)
		}
	}
	_, err := Parse("front.yaml", []byte("lisetners: []\n"))
	if err == nil || !strings.Contains(err.Error(), "classes, lifo, feedback)") {
		t.Errorf("the known keys were shortened: %v", err)
	}
}
