package conf

import (
	"reflect"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	const header = "front.yaml:"
	cases := []struct {
		name  string
		text  string // appended to minimal: first line 5
		whole bool   // text replaces minimal's listeners (line 4 on)
		want  []string
	}{{
		name: "reservations above capacity",
		text: "backends: {expected: 5, concurrency_cap: 5}\ncustomers:\n" +
			"  - {name: A, domains: [a.example], reservation: 1000}\n" +
			"  - {name: B, domains: [b.example], reservation: 300}\n  - {name: default}\n",
		want: []string{header + `6: customers: reservations add up to 1300 req/s, more than the estimated ` +
			`capacity of 1250 req/s (backends.expected 5 x concurrency_cap 5 / typical_service_time 20ms)`},
	}, {
		name: "reservations at capacity",
		text: "backends: {expected: 5, concurrency_cap: 5}\ncustomers:\n" +
			"  - {name: A, domains: [a.example], reservation: 1250}\n  - {name: default}\n",
	}, {
		name: "capacity unknown",
		text: "backends: {expected: 5}\ncustomers: [{name: A, domains: [a.example], reservation: 10}, {name: default}]\n",
		want: []string{header + `5: backends: reservations add up to 10 req/s but capacity is unknown: ` +
			`set backends.expected and backends.concurrency_cap to have them checked`},
	}, {
		name: "customer without domains, reservation or cap",
		text: "customers:\n  - {name: A, domains: [a.example], cap: 5}\n  - {name: B}\n  - {name: default}\n",
		want: []string{
			header + `7: customers[1]: customer "B" has no domains, so no request is ever classified to it`,
			header + `7: customers[1]: customer "B" has no reservation and no cap: it has no guarantee and no limit`,
		},
	}, {
		name: "implicit default customer",
		text: "scheduler:\n  default_customer: othr\ncustomers: [{name: other, domains: [o.example], cap: 1}]\n",
		want: []string{header + `6: scheduler.default_customer: default customer "othr" is not in customers; ` +
			`it was added with no domains, no reservation, no cap and weight 1`},
	}, {
		name: "implicit default customer by default",
		text: "customers: [{name: other, domains: [o.example], cap: 1}]\n",
		want: []string{header + `5: scheduler.default_customer: default customer "default" is not in customers; ` +
			`it was added with no domains, no reservation, no cap and weight 1`},
	}, {
		name:  "fifo listener with caps",
		whole: true,
		text: "listeners:\n  - {vip: 198.18.0.100, port: 8080, policy: fifo}\n" +
			"customers: [{name: A, domains: [a.example], cap: 1}, {name: default}]\n",
		want: []string{header + `5: listeners[0].policy: policy fifo on 198.18.0.100:8080 ignores the customers' reservations and caps`},
	}, {
		name:  "lifo-pri listener with caps",
		whole: true,
		text: "listeners:\n  - {vip: 198.18.0.100, port: 80, policy: lifo-pri}\n" +
			"customers: [{name: A, domains: [a.example], cap: 1}, {name: default}]\n",
		want: []string{header + `5: listeners[0].policy: policy lifo-pri on 198.18.0.100:80 ignores the customers' reservations and caps`},
	}, {
		name: "classes without a lifo listener",
		text: "classes: [{name: a, kind: browsing, utility: 1}]\nlifo: {upper: 1}\n",
		want: []string{
			header + `5: classes: no listener has policy lifo-pri, eight-fifo or single-fifo, so classes is not used`,
			header + `6: lifo: no listener has policy lifo-pri, eight-fifo or single-fifo, so lifo is not used`,
		},
	}, {
		name: "queue timeout below service time",
		text: "scheduler: {queue_timeout: 10ms}\n",
		want: []string{header + `5: scheduler.queue_timeout: 10ms is shorter than typical_service_time 20ms: queued requests will mostly time out`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := minimal + tc.text
			if tc.whole {
				text = strings.TrimSuffix(minimal, minimalListeners) + tc.text
			}
			f, err := Parse("front.yaml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range f.Check() {
				got = append(got, w.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("warnings:\n  %q\nwant:\n  %q", got, tc.want)
			}
		})
	}
}
