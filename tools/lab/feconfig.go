package lab

import (
	"fmt"
	"strings"
)

// Customer is one customer of a front-end configuration written by
// FrontendYAML.
type Customer struct {
	Name        string
	Domains     []string
	Reservation float64
	Cap         float64
	Weight      float64
}

// FrontendYAML returns a front-end configuration file for this lab's
// addresses and key (stateDir is the lab's state directory), with every
// listener on the credit policy and the given customers; schedulerExtra
// lines (already indented by two spaces) are appended to the scheduler
// section.
func FrontendYAML(stateDir string, backends, capacity int, customers []Customer, schedulerExtra ...string) string {
	return FrontendYAMLPolicy(stateDir, backends, capacity, "credit", customers, schedulerExtra...)
}

// FrontendYAMLPolicy is FrontendYAML with every listener on the given
// policy (credit, fifo, lifo-pri, eight-fifo, single-fifo).
func FrontendYAMLPolicy(stateDir string, backends, capacity int, policy string, customers []Customer, schedulerExtra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "link: {interface: %s, type: afpacket}\n", hostDev)
	fmt.Fprintf(&b, "handoff: %s\n", HandoffAddr)
	fmt.Fprintf(&b, "admin: %s\n", adminAddr)
	fmt.Fprintf(&b, "control: {listen: %s, key_file: %s/key}\n", controlAddr, stateDir)
	fmt.Fprintf(&b, "tcp: {linger: 1s, head_timeout: 2s}\n")
	fmt.Fprintf(&b, "backends: {concurrency_cap: %d, expected: %d, keepalive_interval: 1s}\n", capacity, backends)
	b.WriteString("scheduler:\n  default_customer: other\n")
	for _, line := range schedulerExtra {
		b.WriteString(line + "\n")
	}
	b.WriteString("listeners:\n")
	for _, port := range strings.Split(webPorts, ",") {
		fmt.Fprintf(&b, "  - {vip: %s, port: %s, policy: %s}\n", VIP, port, policy)
	}
	if len(customers) > 0 {
		b.WriteString("customers:\n")
	}
	for _, c := range customers {
		quoted := make([]string, len(c.Domains))
		for i, d := range c.Domains {
			quoted[i] = fmt.Sprintf("%q", d) // "*" starts a YAML alias unquoted
		}
		w := c.Weight
		if w == 0 {
			w = 1
		}
		fmt.Fprintf(&b, "  - name: %s\n    domains: [%s]\n    reservation: %g\n    cap: %g\n    weight: %g\n",
			c.Name, strings.Join(quoted, ", "), c.Reservation, c.Cap, w)
	}
	return b.String()
}

// SetBackendsOption adds key: value to the backends section of a
// configuration written by FrontendYAML (a flow mapping on one line).
func SetBackendsOption(y, key, value string) string {
	const marker = "backends: {"
	return strings.Replace(y, marker, marker+key+": "+value+", ", 1)
}
