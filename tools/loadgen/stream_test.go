package loadgen

import (
	"strings"
	"testing"
)

func TestParseStream(t *testing.T) {
	got, err := ParseStream("name=A,host=a.example,rate=1000,path=/data/1K?service=40ms,arrival=constant")
	want := Stream{Name: "A", Host: "a.example", Rate: 1000, Path: "/data/1K?service=40ms", Arrival: Constant}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	got, err = ParseStream("rate=2.5,name=B")
	want = Stream{Name: "B", Rate: 2.5, Path: "/", Arrival: Poisson}
	if err != nil || got != want {
		t.Fatalf("defaults: got %+v, %v; want %+v", got, err, want)
	}
}

func TestParseStreamErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct{ in, mention string }{
		{"name=A,rat=5", `unknown key "rat"`},
		{"name=A", `"rate" is missing`},
		{"rate=5", `"name" is missing`},
		{"name=,rate=5", `"name"`},
		{"name=A,rate=fast", `"rate": "fast" is not a number`},
		{"name=A,rate=0", `"rate"`},
		{"name=A,rate=-3", `"rate"`},
		{"name=A,rate=NaN", `"rate"`},
		{"name=A,rate=5e9", `"rate"`},
		{"name=A,rate=5,arrival=bursty", `"arrival": unknown arrival "bursty"`},
		{"name=A,rate=5,path=data", `"path"`},
		{"name=A,rate=5,host=a b", `"host"`},
		{"name=A,rate=5,name=B", `"name" given twice`},
		{"name=A,rate=5,oops", `"oops" is not key=value`},
		{"", `is not key=value`},
	} {
		_, err := ParseStream(c.in)
		if err == nil {
			t.Errorf("%q accepted", c.in)
			continue
		}
		if !strings.Contains(err.Error(), c.mention) || !strings.Contains(err.Error(), c.in) {
			t.Errorf("%q: error %q should quote the input and mention %s", c.in, err, c.mention)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	ok := Config{Target: "http://198.18.0.100:8080", Duration: 1, Streams: []Stream{{Name: "A", Rate: 1, Path: "/", Arrival: Poisson}}}
	if c, err := ok.withDefaults(); err != nil || c.Timeout != DefaultTimeout || c.MaxInFlight != DefaultMaxInFlight {
		t.Fatalf("valid config: %+v, %v", c, err)
	}
	for name, mutate := range map[string]func(*Config){
		"https target":     func(c *Config) { c.Target = "https://198.18.0.100" },
		"no host":          func(c *Config) { c.Target = "http://" },
		"path in target":   func(c *Config) { c.Target = "http://198.18.0.100/data" },
		"no streams":       func(c *Config) { c.Streams = nil },
		"zero duration":    func(c *Config) { c.Duration = 0 },
		"negative warmup":  func(c *Config) { c.Warmup = -1 },
		"negative timeout": func(c *Config) { c.Timeout = -1 },
		"negative conns":   func(c *Config) { c.ConnsPerStream = -1 },
		"negative bound":   func(c *Config) { c.MaxInFlight = -1 },
		"bad stream":       func(c *Config) { c.Streams[0].Rate = 0 },
		"duplicate names":  func(c *Config) { c.Streams = append(c.Streams, c.Streams[0]) },
	} {
		c := ok
		c.Streams = append([]Stream(nil), ok.Streams...)
		mutate(&c)
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
