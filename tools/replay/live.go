package replay

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Live replay (qsplice-replay -live, issue 11): the client side of a
// capture is played against a running server -- a lab's VIP -- with real
// kernel sockets. This file turns a capture into what each connection
// asked and got: the client's bytes are reassembled per connection and
// cut into HTTP requests, the server's into responses (status, body
// length, the body's SHA-256 when the capture holds all of it). live_run.go
// plays them.

// LiveConn is one captured connection.
type LiveConn struct {
	Client, Server netip.AddrPort
	Start          time.Duration // its SYN, from the capture's first SYN
	Exchanges      []LiveExchange
}

// LiveExchange is one request and what the captured server answered.
type LiveExchange struct {
	At      time.Duration // the request's first byte, from its connection's SYN
	Request []byte        // as the client sent it, head and body
	Method  string
	Target  string
	// What the capture shows of the response; Status 0: none captured.
	Status  int
	BodyLen int64
	BodySHA [32]byte
	HaveSHA bool // the capture holds the whole body
}

// halfStream reassembles one direction of a connection by sequence
// number; bytes the capture missed leave a gap, after which nothing is
// trusted.
type halfStream struct {
	isn     uint32
	started bool
	data    []byte
	filled  []bool // per byte: captured
	times   []time.Time
}

func (h *halfStream) add(seq uint32, payload []byte, at time.Time) {
	if !h.started || len(payload) == 0 {
		return
	}
	off := int(seq - h.isn - 1)
	if off < 0 || off > 1<<30 {
		return // before the stream or absurdly far: not ours to place
	}
	end := off + len(payload)
	for len(h.data) < end {
		h.data = append(h.data, 0)
		h.filled = append(h.filled, false)
		h.times = append(h.times, time.Time{})
	}
	for i, b := range payload {
		if !h.filled[off+i] {
			h.data[off+i], h.filled[off+i], h.times[off+i] = b, true, at
		}
	}
}

// contiguous is the captured prefix of the stream.
func (h *halfStream) contiguous() []byte {
	n := 0
	for n < len(h.filled) && h.filled[n] {
		n++
	}
	return h.data[:n]
}

type liveKey struct{ client, server netip.AddrPort }

type capturedConn struct {
	key      liveKey
	syn      time.Time
	up, down halfStream
}

// ReadLiveCapture reads a capture (pcap or pcapng, Ethernet) and returns
// its complete connections: those whose SYN it holds.
func ReadLiveCapture(r io.Reader) ([]LiveConn, error) {
	cr, err := openCapture(r)
	if err != nil {
		return nil, err
	}
	conns := map[liveKey]*capturedConn{}
	var order []*capturedConn
	var first time.Time
	for {
		at, frame, err := cr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip == nil || tcp == nil {
			continue
		}
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip.SrcIP.To4())), uint16(tcp.SrcPort))
		dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip.DstIP.To4())), uint16(tcp.DstPort))
		if tcp.SYN && !tcp.ACK {
			k := liveKey{src, dst}
			if c := conns[k]; c != nil && c.up.started && len(c.up.data) > 0 {
				delete(conns, k) // the tuple is used again: a new connection
			}
			if conns[k] == nil {
				c := &capturedConn{key: k, syn: at}
				c.up.isn, c.up.started = tcp.Seq, true
				conns[k], order = c, append(order, c)
				if first.IsZero() {
					first = at
				}
			}
			continue
		}
		if c := conns[liveKey{src, dst}]; c != nil {
			c.up.add(tcp.Seq, tcp.Payload, at)
		} else if c := conns[liveKey{dst, src}]; c != nil {
			if tcp.SYN && tcp.ACK {
				c.down.isn, c.down.started = tcp.Seq, true
				continue
			}
			c.down.add(tcp.Seq, tcp.Payload, at)
		}
	}
	var out []LiveConn
	for _, c := range order {
		lc := LiveConn{Client: c.key.client, Server: c.key.server, Start: c.syn.Sub(first)}
		lc.Exchanges = exchanges(c)
		if len(lc.Exchanges) > 0 {
			out = append(out, lc)
		}
	}
	return out, nil
}

// exchanges cuts a connection's streams into requests and responses.
func exchanges(c *capturedConn) []LiveExchange {
	up := c.up.contiguous()
	var ex []LiveExchange
	var methods []*http.Request
	off := 0
	for off < len(up) {
		rest := bytes.NewReader(up[off:])
		br := bufio.NewReader(rest)
		req, err := http.ReadRequest(br)
		if err != nil {
			break
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			break // a body the capture does not hold whole
		}
		n := len(up) - off - rest.Len() - br.Buffered()
		at := c.up.times[off].Sub(c.syn)
		ex = append(ex, LiveExchange{At: at, Request: slices.Clone(up[off : off+n]), Method: req.Method, Target: req.RequestURI})
		methods = append(methods, req)
		off += n
	}
	down := c.down.contiguous()
	complete := len(down) == len(c.down.data)
	resps := bufio.NewReader(bytes.NewReader(down))
	for i := range ex {
		resp, err := http.ReadResponse(resps, methods[i])
		if err != nil {
			break
		}
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		ex[i].Status, ex[i].BodyLen = resp.StatusCode, n
		if resp.ContentLength >= 0 {
			ex[i].BodyLen = resp.ContentLength // what the server meant, captured whole or not
		}
		if err == nil && (resp.ContentLength >= 0 || complete) {
			copy(ex[i].BodySHA[:], h.Sum(nil))
			ex[i].HaveSHA = true
		}
		if err != nil {
			break // the capture lost the rest of the stream
		}
	}
	return ex
}

// LiveServers lists the server endpoints of conns, sorted.
func LiveServers(conns []LiveConn) []netip.AddrPort {
	var s []netip.AddrPort
	for _, c := range conns {
		if !slices.Contains(s, c.Server) {
			s = append(s, c.Server)
		}
	}
	sort.Slice(s, func(i, j int) bool { return s[i].Compare(s[j]) < 0 })
	return s
}

// MapServers decides where each captured server's connections go: the
// explicit mapping, else target for a capture with one server. A server
// left without a place is an error that names it.
func MapServers(conns []LiveConn, target netip.AddrPort, mapping map[netip.AddrPort]netip.AddrPort) (map[netip.AddrPort]netip.AddrPort, error) {
	servers := LiveServers(conns)
	if len(servers) == 0 {
		return nil, errors.New("live replay: the capture holds no connection with both its SYN and a request")
	}
	out := map[netip.AddrPort]netip.AddrPort{}
	var unmapped []string
	for _, s := range servers {
		switch to, ok := mapping[s]; {
		case ok:
			out[s] = to
		case target.IsValid() && len(servers) == 1:
			out[s] = target
		default:
			unmapped = append(unmapped, s.String())
		}
	}
	if len(unmapped) > 0 {
		all := make([]string, len(servers))
		for i, s := range servers {
			all[i] = s.String()
		}
		return nil, fmt.Errorf("live replay: the capture talks to %s; -target maps a capture with one server only: map %s with -map CAPTURED=LIVE,...",
			strings.Join(all, ", "), strings.Join(unmapped, ", "))
	}
	return out, nil
}
