package conf

import (
	"os"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/sched"
)

// FuzzParse feeds arbitrary bytes to Parse: it must never panic, must
// return either a File or an error, and every error line must carry the
// file name. A File it returns must pass Check and Classify.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	feedback, err := os.ReadFile("testdata/feedback.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(feedback)
	f.Add([]byte(minimal))
	f.Add([]byte(classifyFile))
	for _, tc := range badFiles {
		f.Add([]byte(minimal + tc.text))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("f.yaml", data)
		if (file == nil) == (err == nil) {
			t.Fatalf("Parse returned file %v and error %v", file, err)
		}
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml") {
					t.Fatalf("error line %q does not start with the file name", line)
				}
			}
			return
		}
		file.Check()
		// The feedback section, once parsed, is one sched accepts.
		if _, err := sched.NewFeedback(file.Feedback.Policy); err != nil {
			t.Fatalf("feedback section parsed, but NewFeedback: %v", err)
		}
		cc := file.Feedback.Classifier
		cc.Classes = file.Feedback.Policy.Classes
		if _, err := sched.NewFeedbackClassifier(cc); err != nil {
			t.Fatalf("feedback section parsed, but NewFeedbackClassifier: %v", err)
		}
		for _, c := range file.Customers {
			for _, d := range c.Domains {
				host := strings.TrimPrefix(d, "*.")
				if d != host {
					host = "x." + host
					if _, exact := file.exact[host]; exact {
						continue // exact names win over wildcards
					}
				}
				if got := file.Classify(host); got != c.Name {
					t.Fatalf("Classify(%q) = %q, want %q", host, got, c.Name)
				}
			}
		}
	})
}
