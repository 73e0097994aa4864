package conf

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/qsplice/qsplice/splice/wire"
)

// decoder walks a yaml.Node tree, turning scalars into typed values and
// collecting every problem with its line and key path instead of stopping
// at the first. A helper that finds a problem records it and returns the
// default, so the walk goes on and later problems are reported too.
type decoder struct {
	file  string
	errs  []*Error
	lines map[string]int
}

func (d *decoder) errorf(line int, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Path: path, Message: fmt.Sprintf(format, excerptArgs(format, args)...)})
}

// sortedErrors returns the problems in file order; problems on the same
// line keep the order they were found in.
func (d *decoder) sortedErrors() []*Error {
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	return d.errs
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

// absent reports whether a key was left out or given no value; both mean
// "use the default".
func absent(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(excerpt(n.Value))
	}
	return "something else"
}

// mapping checks that n is a mapping whose keys are all in known, and
// returns its values by key (aliases followed). Unknown, duplicate and
// non-scalar keys are reported; the line of every key is recorded under
// its path for Check. It returns nil when n is not a mapping, so that
// callers skip the keys they would otherwise report missing.
func (d *decoder) mapping(n *yaml.Node, path string, known []string) map[string]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, path, "expected a mapping, found %s", describe(n))
		return nil
	}
	out := make(map[string]*yaml.Node, len(known))
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.errorf(k.Line, path, "keys must be plain words, found %s", describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.errorf(k.Line, path, "merge keys (<<) are not supported")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errorf(k.Line, path, "key %q repeated (first at line %d)", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		if !contains(known, k.Value) {
			d.errorf(k.Line, path, "unknown key %q (known: %s)", k.Value, strings.Join(known, ", "))
			continue
		}
		d.lines[join(path, k.Value)] = k.Line
		out[k.Value] = v
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sequence checks that n is a list and returns its items, aliases followed.
func (d *decoder) sequence(n *yaml.Node, path string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n.Line, path, "expected a list, found %s", describe(n))
		return nil
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, it := range n.Content {
		items[i] = deref(it)
		d.lines[index(path, i)] = items[i].Line
	}
	return items
}

// scalar returns n's text, or reports that n is a mapping or list.
func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n.Line, path, "expected a single value, found %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// scalars calls each with the text, line and path of every item of the
// list n (nothing when n is absent), reporting items that are not single
// values: the lists of names, subnets and cookies are all read this way.
func (d *decoder) scalars(n *yaml.Node, path string, each func(s string, line int, path string)) {
	if absent(n) {
		return
	}
	for j, item := range d.sequence(n, path) {
		ipath := index(path, j)
		if s, ok := d.scalar(item, ipath); ok {
			each(s, item.Line, ipath)
		}
	}
}

func (d *decoder) str(n *yaml.Node, path, def string) string {
	if absent(n) {
		return def
	}
	if s, ok := d.scalar(n, path); ok {
		return s
	}
	return def
}

// integer decodes a whole number in lo..hi.
func (d *decoder) integer(n *yaml.Node, path string, def, lo, hi int) int {
	if absent(n) {
		return def
	}
	s, ok := d.scalar(n, path)
	if !ok {
		return def
	}
	var v int64
	if n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		d.errorf(n.Line, path, "%q is not a whole number", s)
		return def
	}
	if v < int64(lo) || v > int64(hi) {
		d.errorf(n.Line, path, "%s", rangeMessage(strconv.FormatInt(v, 10), lo, hi, strconv.Itoa))
		return def
	}
	return int(v)
}

// number decodes a finite number; positive asks for > 0, else >= 0 is
// enough.
func (d *decoder) number(n *yaml.Node, path string, def float64, positive bool) float64 {
	if absent(n) {
		return def
	}
	if v, ok := d.finite(n, path); ok && signAllowed(d, n, path, v, positive) {
		return v
	}
	return def
}

// signed decodes a finite number of either sign.
func (d *decoder) signed(n *yaml.Node, path string, def float64) float64 {
	if absent(n) {
		return def
	}
	if v, ok := d.finite(n, path); ok {
		return v
	}
	return def
}

// finite reads the number n holds (n is present), reporting anything
// else, infinities and NaN included.
func (d *decoder) finite(n *yaml.Node, path string) (float64, bool) {
	s, ok := d.scalar(n, path)
	if !ok {
		return 0, false
	}
	var v float64
	tag := n.ShortTag()
	if tag != "!!int" && tag != "!!float" || n.Decode(&v) != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.errorf(n.Line, path, "%q is not a number", s)
		return 0, false
	}
	return v, true
}

// signAllowed reports whether v is > 0 (positive) or >= 0 (otherwise),
// and says which was wanted when it is not.
func signAllowed[T ~int64 | ~float64](d *decoder, n *yaml.Node, path string, v T, positive bool) bool {
	switch {
	case positive && v <= 0:
		d.errorf(n.Line, path, "must be > 0")
		return false
	case v < 0:
		d.errorf(n.Line, path, "must be >= 0")
		return false
	}
	return true
}

// duration decodes a Go duration ("10ms"); positive asks for > 0, else
// >= 0 is enough.
func (d *decoder) duration(n *yaml.Node, path string, def time.Duration, positive bool) time.Duration {
	if absent(n) {
		return def
	}
	s, ok := d.scalar(n, path)
	if !ok {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.errorf(n.Line, path, "%q is not a duration (write it like \"10ms\", \"2s\" or \"15m\")", s)
		return def
	}
	if !signAllowed(d, n, path, v, positive) {
		return def
	}
	return v
}

// size decodes a byte count: a whole number with an optional K, M or G
// suffix (powers of 1024), in lo..hi.
func (d *decoder) size(n *yaml.Node, path string, def, lo, hi int) int {
	if absent(n) {
		return def
	}
	s, ok := d.scalar(n, path)
	if !ok {
		return def
	}
	v, ok := parseSize(s)
	if !ok {
		d.errorf(n.Line, path, "%q is not a size (write it like \"512\", \"16K\" or \"1M\")", s)
		return def
	}
	if v < int64(lo) || v > int64(hi) {
		d.errorf(n.Line, path, "%s", rangeMessage(s, lo, hi, FormatSize))
		return def
	}
	return int(v)
}

func rangeMessage(got string, lo, hi int, show func(int) string) string {
	if hi == math.MaxInt {
		return fmt.Sprintf("must be >= %s", show(lo))
	}
	return fmt.Sprintf("%s is out of range %s..%s", got, show(lo), show(hi))
}

// parseSize reads "16K"-style sizes. It accepts at most 2^40 bytes so that
// nothing overflows.
func parseSize(s string) (int64, bool) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	if s == "" || s[0] == '+' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > 1<<40/mult || v < -(1<<40)/mult {
		return 0, false
	}
	return v * mult, true
}

// FormatSize writes a byte count the way the file reads them: "16K"
// when it is a whole number of KiB, and so on.
func FormatSize(v int) string {
	switch {
	case v != 0 && v%(1<<30) == 0:
		return strconv.Itoa(v>>30) + "G"
	case v != 0 && v%(1<<20) == 0:
		return strconv.Itoa(v>>20) + "M"
	case v != 0 && v%(1<<10) == 0:
		return strconv.Itoa(v>>10) + "K"
	}
	return strconv.Itoa(v)
}

// ipv4 decodes a unicast IPv4 address, as the packet engine needs.
func (d *decoder) ipv4(n *yaml.Node, path string) netip.Addr {
	s, ok := d.scalar(n, path)
	if !ok {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		d.errorf(n.Line, path, "%q is not an IP address", s)
	case !a.Is4():
		d.errorf(n.Line, path, "%s is not an IPv4 address", a)
	case !a.IsGlobalUnicast() && !a.IsLoopback() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		d.errorf(n.Line, path, "%s is not a unicast address", a)
	default:
		return a
	}
	return netip.Addr{}
}

// addrPort decodes "address:port" for a kernel socket (IPv4 or IPv6,
// "[::1]:80" form for IPv6), port not 0.
func (d *decoder) addrPort(n *yaml.Node, path string) netip.AddrPort {
	s, ok := d.scalar(n, path)
	if !ok {
		return netip.AddrPort{}
	}
	ap, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		d.errorf(n.Line, path, "%q is not an address:port (write it like \"198.18.0.2:7400\")", s)
	case ap.Port() == 0:
		d.errorf(n.Line, path, "port must not be 0")
	case ap.Addr().IsMulticast():
		d.errorf(n.Line, path, "%s is a multicast address", ap.Addr())
	default:
		return ap
	}
	return netip.AddrPort{}
}

// mac decodes "aa:bb:cc:dd:ee:ff"; "" means none.
func (d *decoder) mac(n *yaml.Node, path string) wire.MAC {
	s := d.str(n, path, "")
	if s == "" {
		return wire.MAC{}
	}
	m, err := wire.ParseMAC(s)
	switch {
	case err != nil:
		d.errorf(n.Line, path, "%q is not a MAC address (write it like \"02:00:00:00:00:01\")", s)
	case m[0]&1 != 0:
		d.errorf(n.Line, path, "%s is a multicast address", m)
	case m == wire.MAC{}:
		d.errorf(n.Line, path, "the zero MAC is not usable (leave mac empty for the default)")
	default:
		return m
	}
	return wire.MAC{}
}
