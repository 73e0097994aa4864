package conf

import "testing"

// badFiles are appended to minimal (first line 5) unless whole is set.
var badFiles = []struct {
	name  string
	text  string
	whole bool
	want  []string
}{
	// Unknown keys, at every level.
	{name: "unknown top-level key", text: "lisetners: []\n", want: []string{
		`front.yaml:5: unknown key "lisetners" (known: link, handoff, admin, control, capture, tcp, backends, scheduler, listeners, customers, classes, lifo, feedback)`}},
	{name: "unknown link key", whole: true, text: "link: {interface: eth0, mtu: 1500}\nhandoff: 198.18.0.101\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners: [{vip: 198.18.0.100, port: 80}]\n", want: []string{
		`front.yaml:1: link: unknown key "mtu" (known: interface, type, mac)`}},
	{name: "unknown control key", whole: true, text: "link: {interface: eth0}\nhandoff: 198.18.0.101\n" +
		"control:\n  listen: 198.18.0.2:7400\n  key_file: k\n  key: abc\nlisteners: [{vip: 198.18.0.100, port: 80}]\n", want: []string{
		`front.yaml:6: control: unknown key "key" (known: listen, key_file)`}},
	{name: "unknown tcp key", text: "tcp: {lingr: 5s}\n", want: []string{
		`front.yaml:5: tcp: unknown key "lingr" (known: linger, idle_timeout, head_timeout, max_head, cookie_seed, max_flows, max_flows_per_source, max_ports_per_source, flow_lifetime, half_close_timeout)`}},
	{name: "unknown backends key", text: "backends:\n  expect: 5\n", want: []string{
		`front.yaml:6: backends: unknown key "expect" (known: concurrency_cap, expected, handoff_ahead, keepalive_interval, splice_retry)`}},
	{name: "unknown scheduler key", text: "scheduler:\n  cycle: 10ms\n  cycel: 10ms\n", want: []string{
		`front.yaml:7: scheduler: unknown key "cycel" (known: cycle, typical_service_time, normal_size, balance_limit, debt_limit, queue_timeout, cap_window, queue_capacity, retry_after, default_customer)`}},
	{name: "unknown normal_size key", text: "scheduler: {normal_size: {min: 0, maxi: 1}}\n", want: []string{
		`front.yaml:5: scheduler.normal_size: unknown key "maxi" (known: min, max)`}},
	{name: "unknown listener key", whole: true, text: "link: {interface: eth0}\nhandoff: 198.18.0.101\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners:\n  - vip: 198.18.0.100\n    port: 80\n    proto: tcp\n", want: []string{
		`front.yaml:7: listeners[0]: unknown key "proto" (known: vip, port, policy, queue_timeout)`}},
	{name: "unknown customer key", text: "customers:\n  - name: A\n  - name: B\n    reservaton: 5\n", want: []string{
		`front.yaml:8: customers[1]: unknown key "reservaton" (known: name, domains, reservation, cap, weight, queue_capacity)`}},
	{name: "repeated key", text: "tcp:\n  linger: 1s\n  linger: 2s\n", want: []string{
		`front.yaml:7: tcp: key "linger" repeated (first at line 6)`}},
	{name: "merge key", text: "tcp: &t {linger: 1s}\nbackends: {<<: *t}\n", want: []string{
		`front.yaml:6: backends: merge keys (<<) are not supported`}},

	// Wrong types.
	{name: "reservation not a number", text: "customers:\n  - name: A\n    reservation: lots\n", want: []string{
		`front.yaml:7: customers[0].reservation: "lots" is not a number`}},
	{name: "quoted number", text: "customers: [{name: A, cap: \"5\"}]\n", want: []string{
		`front.yaml:5: customers[0].cap: "5" is not a number`}},
	{name: "NaN weight", text: "customers: [{name: A, weight: .nan}]\n", want: []string{
		`front.yaml:5: customers[0].weight: ".nan" is not a number`}},
	{name: "duration without unit", text: "tcp: {linger: 5}\n", want: []string{
		`front.yaml:5: tcp.linger: "5" is not a duration (write it like "10ms", "2s" or "15m")`}},
	{name: "size not a size", text: "tcp: {max_head: big}\n", want: []string{
		`front.yaml:5: tcp.max_head: "big" is not a size (write it like "512", "16K" or "1M")`}},
	{name: "fraction for a count", text: "backends: {expected: 2.5}\n", want: []string{
		`front.yaml:5: backends.expected: "2.5" is not a whole number`}},
	{name: "list for a mapping", text: "scheduler: [1, 2]\n", want: []string{
		`front.yaml:5: scheduler: expected a mapping, found a list`}},
	{name: "mapping for a list", text: "customers: {name: A}\n", want: []string{
		`front.yaml:5: customers: expected a list, found a mapping`}},
	{name: "string for a list", text: "customers: [{name: A, domains: a.example}]\n", want: []string{
		`front.yaml:5: customers[0].domains: expected a list, found "a.example"`}},
	{name: "list for a value", text: "customers: [{name: [A]}]\n", want: []string{
		`front.yaml:5: customers[0].name: expected a single value, found a list`}},
	{name: "top level not a mapping", whole: true, text: "- link\n", want: []string{
		`front.yaml:1: expected a mapping, found a list`}},
	{name: "scalar for a required section", whole: true, text: "link: eth0\nhandoff: 198.18.0.101\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners: [80]\n", want: []string{
		`front.yaml:1: link: expected a mapping, found "eth0"`,
		`front.yaml:4: listeners[0]: expected a mapping, found "80"`}},
	{name: "mapping as key", text: "? [a]\n: 1\n", want: []string{
		`front.yaml:5: keys must be plain words, found a list`}},

	// Customers and domains.
	{name: "duplicate customer names", text: "customers:\n  - name: A\n  - name: B\n  - name: A\n", want: []string{
		`front.yaml:8: customers[2].name: "A" is already the name of customers[0]`}},
	{name: "duplicate domains across customers", text: "customers:\n  - {name: A, domains: [a.example, \"*.a.example\"]}\n" +
		"  - {name: B, domains: [b.example, A.Example.]}\n  - {name: C, domains: [\"*.A.example\"]}\n", want: []string{
		`front.yaml:7: customers[1].domains[1]: "a.example" is already listed at customers[0].domains[0]`,
		`front.yaml:8: customers[2].domains[0]: "*.a.example" is already listed at customers[0].domains[1]`}},
	{name: "bad domains", text: "customers:\n  - name: A\n    domains:\n      - \"*\"\n      - a.*.example\n" +
		"      - a.example:80\n      - -a.example\n      - \"\"\n      - [x]\n", want: []string{
		`front.yaml:8: customers[0].domains[0]: "*" is not a domain: a wildcard must be the whole leftmost label, as in "*.example.com"`,
		`front.yaml:9: customers[0].domains[1]: "a.*.example" is not a domain: a wildcard must be the whole leftmost label, as in "*.example.com"`,
		`front.yaml:10: customers[0].domains[2]: "a.example:80" is not a domain: leave the port out (it is ignored when classifying)`,
		`front.yaml:11: customers[0].domains[3]: "-a.example" is not a domain name`,
		`front.yaml:12: customers[0].domains[4]: "" is not a domain name`,
		`front.yaml:13: customers[0].domains[5]: expected a single value, found a list`}},
	{name: "bad customer names", text: "customers: [{name: A B}, {name: \"\"}, {reservation: 1}]\nscheduler: {default_customer: \"o/ther\"}\n", want: []string{
		`front.yaml:5: customers[0].name: "A B" may hold only letters, digits, '-', '_' and '.'`,
		`front.yaml:5: customers[1].name: must be 1 to 64 characters`,
		`front.yaml:5: customers[2].name: required`,
		`front.yaml:6: scheduler.default_customer: "o/ther" may hold only letters, digits, '-', '_' and '.'`}},
	{name: "negative reservation", text: "customers:\n  - name: A\n  - name: B\n    reservation: -1\n", want: []string{
		`front.yaml:8: customers[1].reservation: must be >= 0`}},
	{name: "zero weight", text: "customers: [{name: A, weight: 0}]\n", want: []string{
		`front.yaml:5: customers[0].weight: must be > 0`}},
	{name: "cap below reservation", text: "customers: [{name: A, reservation: 100, cap: 50}]\n", want: []string{
		`front.yaml:5: customers[0].cap: 50 is below the reservation 100`}},
	{name: "negative queue capacity", text: "customers: [{name: A, queue_capacity: -1}]\n", want: []string{
		`front.yaml:5: customers[0].queue_capacity: must be >= 0`}},

	// Addresses.
	{name: "bad addresses", whole: true, text: "link: {interface: eth0, mac: \"01:00:5e:00:00:01\"}\nhandoff: 198.18.0\n" +
		"admin: 198.18.0.2:0\ncontrol: {listen: 198.18.0.2, key_file: k}\nlisteners: [{vip: \"2001:db8::1\", port: 80}]\n", want: []string{
		`front.yaml:1: link.mac: 01:00:5e:00:00:01 is a multicast address`,
		`front.yaml:2: handoff: "198.18.0" is not an IP address`,
		`front.yaml:3: admin: port must not be 0`,
		`front.yaml:4: control.listen: "198.18.0.2" is not an address:port (write it like "198.18.0.2:7400")`,
		`front.yaml:5: listeners[0].vip: 2001:db8::1 is not an IPv4 address`}},
	{name: "non-unicast addresses", whole: true, text: "link: {interface: eth0, mac: \"02:00:00:00:00\"}\nhandoff: 0.0.0.0\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners: [{vip: 224.0.0.1, port: 80}, {vip: 255.255.255.255, port: 80}]\n", want: []string{
		`front.yaml:1: link.mac: "02:00:00:00:00" is not a MAC address (write it like "02:00:00:00:00:01")`,
		`front.yaml:2: handoff: 0.0.0.0 is not a unicast address`,
		`front.yaml:4: listeners[0].vip: 224.0.0.1 is not a unicast address`,
		`front.yaml:4: listeners[1].vip: 255.255.255.255 is not a unicast address`}},
	{name: "empty interface name", whole: true, text: "link: {interface: \"\"}\nhandoff: 198.18.0.101\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners: [{vip: 198.18.0.100, port: 80}]\nlink: {interface: eth1}\n", want: []string{
		`front.yaml:1: link.interface: "" is not an interface name`,
		`front.yaml:5: key "link" repeated (first at line 1)`}},
	{name: "long interface name", whole: true, text: "link: {interface: a-very-long-name0}\nhandoff: 198.18.0.101\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners: [{vip: 198.18.0.100, port: 80}]\n", want: []string{
		`front.yaml:1: link.interface: "a-very-long-name0" is not an interface name`}},
	{name: "handoff is a VIP", whole: true, text: "link: {interface: eth0}\nhandoff: 198.18.0.100\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners: [{vip: 198.18.0.100, port: 80}]\n", want: []string{
		`front.yaml:4: listeners[0].vip: 198.18.0.100 is also the handoff address; the two must differ`}},

	// Listeners.
	{name: "unknown policy", whole: true, text: "link: {interface: eth0}\nhandoff: 198.18.0.101\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners:\n  - {vip: 198.18.0.100, port: 80, policy: lifo}\n", want: []string{
		`front.yaml:5: listeners[0].policy: "lifo" is not a policy (known: credit, fifo, lifo-pri, eight-fifo, single-fifo, feedback)`}},
	{name: "no listeners and a duplicate", whole: true, text: "link: {interface: eth0, type: raw}\nhandoff: 198.18.0.101\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners:\n  - {vip: 198.18.0.100, port: 80}\n" +
		"  - {vip: 198.18.0.100, port: 8080}\n  - {vip: 198.18.0.100, port: 80, policy: fifo}\n  - {vip: 198.18.0.100}\n", want: []string{
		`front.yaml:1: link.type: "raw" is not a link type (known: afpacket, tap)`,
		`front.yaml:7: listeners[2]: 198.18.0.100:80 is already listed at listeners[0]`,
		`front.yaml:8: listeners[3].port: required`}},
	{name: "empty listeners", whole: true, text: "link: {interface: eth0}\nhandoff: 198.18.0.101\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners: []\n", want: []string{
		`front.yaml:4: listeners: at least one listener is required`}},

	// URL classes and the lifo section.
	{name: "unknown class and lifo keys", text: "classes: [{name: a, kind: browsing, utility: 1, pattern: [/]}]\nlifo: {uper: 1}\n", want: []string{
		`front.yaml:5: classes[0]: unknown key "pattern" (known: name, kind, utility, queue_capacity, patterns)`,
		`front.yaml:6: lifo: unknown key "uper" (known: upper, lower, interval, single_capacity, queue_timeout)`}},
	{name: "bad classes", text: "classes:\n  - {name: main, kind: browsing, utility: 27, patterns: [/, \"/a*\"]}\n" +
		"  - {name: main, kind: shopping, utility: 0, queue_capacity: -1}\n  - {kind: transaction}\n" +
		"  - name: x\n    kind: transaction\n    utility: 5\n    patterns: [login, \"/a*\", \"/b*c\", \"/d?x=1\"]\n", want: []string{
		`front.yaml:7: classes[1].name: "main" is already the name of classes[0]`,
		`front.yaml:7: classes[1].kind: "shopping" is not a kind (known: browsing, transaction)`,
		`front.yaml:7: classes[1].utility: must be > 0`,
		`front.yaml:7: classes[1].queue_capacity: must be >= 0`,
		`front.yaml:8: classes[2].name: required`,
		`front.yaml:8: classes[2].utility: required`,
		`front.yaml:12: classes[3].patterns[0]: "login" must start with "/"`,
		`front.yaml:12: classes[3].patterns[1]: "/a*" is already listed at classes[0].patterns[1]`,
		`front.yaml:12: classes[3].patterns[2]: "/b*c" "*" is only allowed at the end`,
		`front.yaml:12: classes[3].patterns[3]: "/d?x=1" the query string is ignored, patterns cannot contain "?"`}},
	{name: "empty classes", text: "classes: []\n", want: []string{
		`front.yaml:5: classes: at least one class is required (leave the section out for the default eight)`}},
	{name: "bad limits", text: "tcp:\n  max_flows: -1\n  max_flows_per_source: x\n  head_timeout: 20s\n  flow_lifetime: 20s\n  half_close_timeout: 0s\n", want: []string{
		`front.yaml:6: tcp.max_flows: -1 is out of range 0..10000000`,
		`front.yaml:7: tcp.max_flows_per_source: "x" is not a whole number`,
		`front.yaml:9: tcp.flow_lifetime: 20s must exceed head_timeout 20s: a flow lives at least until its head is due`,
		`front.yaml:10: tcp.half_close_timeout: must be > 0`}},
	{name: "queue timeout on a credit listener", whole: true, text: "link: {interface: eth0}\nhandoff: 198.18.0.101\n" +
		"control: {listen: 198.18.0.2:7400, key_file: k}\nlisteners:\n  - {vip: 198.18.0.100, port: 80, queue_timeout: 5s}\n" +
		"  - {vip: 198.18.0.100, port: 81, policy: fifo, queue_timeout: 0s}\n", want: []string{
		`front.yaml:5: listeners[0].queue_timeout: credit listeners share scheduler.queue_timeout; only fifo and class-based listeners have their own`,
		`front.yaml:6: listeners[1].queue_timeout: must be > 0`}},
	{name: "bad lifo values", text: "lifo:\n  upper: 0.8\n  lower: 0.9\n  interval: 0s\n  single_capacity: 0\n  queue_timeout: -1s\n", want: []string{
		`front.yaml:7: lifo.lower: 0.9 is above upper 0.8`,
		`front.yaml:8: lifo.interval: must be > 0`,
		`front.yaml:9: lifo.single_capacity: must be >= 1`,
		`front.yaml:10: lifo.queue_timeout: must be > 0`}},

	// Durations and sizes out of range.
	{name: "negative durations", text: "tcp: {head_timeout: -1s}\nscheduler:\n  debt_limit: 0s\n  retry_after: 1500ms\n  balance_limit: -1ms\n", want: []string{
		`front.yaml:5: tcp.head_timeout: must be > 0`,
		`front.yaml:7: scheduler.debt_limit: must be > 0`,
		`front.yaml:8: scheduler.retry_after: must be whole seconds (Retry-After counts seconds)`,
		`front.yaml:9: scheduler.balance_limit: must be > 0`}},
	{name: "sizes out of range", text: "tcp: {max_head: 100K}\nscheduler: {normal_size: {min: 16K, max: 1K}}\n", want: []string{
		`front.yaml:5: tcp.max_head: 100K is out of range 512..64K`,
		`front.yaml:6: scheduler.normal_size: max 1K is below min 16K`}},
	{name: "negative size and count", text: "scheduler: {normal_size: {min: -1K}, queue_capacity: 0}\nbackends: {concurrency_cap: -1, expected: -1}\n", want: []string{
		`front.yaml:5: scheduler.normal_size.min: must be >= 0`,
		`front.yaml:5: scheduler.queue_capacity: must be >= 1`,
		`front.yaml:6: backends.concurrency_cap: must be >= 0`,
		`front.yaml:6: backends.expected: must be >= 0`}},

	// Missing and malformed files.
	{name: "empty file", whole: true, text: "# nothing\n", want: []string{
		`front.yaml:1: link: required`,
		`front.yaml:1: handoff: required`,
		`front.yaml:1: control: required`,
		`front.yaml:1: listeners: required`}},
	{name: "missing nested keys", whole: true, text: "link: {type: tap}\nhandoff:\ncontrol:\n  listen: 198.18.0.2:7400\n" +
		"  key_file: \"\"\nlisteners: [{port: 80}]\n", want: []string{
		`front.yaml:1: link.interface: required`,
		`front.yaml:2: handoff: required`,
		`front.yaml:5: control.key_file: required`,
		`front.yaml:6: listeners[0].vip: required`}},
	// The YAML library names the line before an unclosed flow mapping.
	{name: "syntax error", text: "tcp: {linger: 5s\n", want: []string{
		`front.yaml:4: did not find expected ',' or '}'`}},
	{name: "two documents", text: "---\nlink: {interface: eth1}\n", want: []string{
		`front.yaml:5: only one YAML document is allowed`}},
}

func TestBadFiles(t *testing.T) {
	for _, tc := range badFiles {
		t.Run(tc.name, func(t *testing.T) {
			text := tc.text
			if !tc.whole {
				text = minimal + text
			}
			f, err := Parse("front.yaml", []byte(text))
			if f != nil {
				t.Errorf("Parse returned a File along with the error")
			}
			assertErrors(t, err, tc.want)
		})
	}
}
