package timeline

import (
	"reflect"
	"testing"
)

// FuzzParseJSON: no input makes ParseJSON panic, and a record it accepts
// is written by AppendJSON as a line that reads back as the same record.
func FuzzParseJSON(f *testing.F) {
	r := sampleRecord()
	f.Add(r.AppendJSON(nil))
	f.Add([]byte(`{"flow":1,"steps":{"syn":-5,"close":3}}`))
	f.Add([]byte(`{"client":"[::1]:80"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseJSON(line)
		if err != nil {
			return
		}
		again, err := ParseJSON(r.AppendJSON(nil))
		if err != nil {
			t.Fatalf("a record read back from its own line: %v", err)
		}
		// Strings pass through AppendJSON's escaping once: compare after
		// a second trip, when they are stable.
		third, err := ParseJSON(again.AppendJSON(nil))
		if err != nil || !reflect.DeepEqual(third, again) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v (%v)", again, third, err)
		}
		if again.Have != r.Have || again.At != r.At {
			t.Fatalf("steps changed: %v %v -> %v %v", r.Have, r.At, again.Have, again.At)
		}
	})
}
