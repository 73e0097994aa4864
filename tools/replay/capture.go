package replay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/qsplice/qsplice/splice/wire"
)

// ErrCookedCapture: the capture has Linux "cooked" headers (what
// tcpdump -i any writes) instead of Ethernet ones, so the frames the
// engine would see cannot be rebuilt from it.
var ErrCookedCapture = errors.New("a Linux cooked capture (tcpdump -i any) has no Ethernet headers to replay; capture on the interface that faces the clients (tcpdump -i eth0 -w FILE)")

// captureReader reads the frames of a capture file, pcap or pcapng,
// whose link type is Ethernet.
type captureReader struct {
	src interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	}
	ng *pcapgo.NgReader // when pcapng: each packet names its interface
}

// pcapngMagic is the block type of a pcapng section header, the same in
// either byte order.
const pcapngMagic = 0x0a0d0d0a

func openCapture(r io.Reader) (*captureReader, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("not a capture: %w", err)
	}
	c := &captureReader{}
	var lt layers.LinkType
	if binary.BigEndian.Uint32(head) == pcapngMagic {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("pcapng: %w", err)
		}
		c.src, c.ng, lt = ng, ng, ng.LinkType()
	} else {
		p, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("neither pcap nor pcapng: %w", err)
		}
		c.src, lt = p, p.LinkType()
	}
	return c, checkLinkType(lt)
}

func checkLinkType(lt layers.LinkType) error {
	switch lt {
	case layers.LinkTypeEthernet:
		return nil
	case layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2:
		return fmt.Errorf("link type %v: %w", lt, ErrCookedCapture)
	}
	return fmt.Errorf("link type %v: only Ethernet captures can be replayed", lt)
}

// Next returns the next frame and its time; io.EOF at the end.
func (c *captureReader) Next() (time.Time, []byte, error) {
	data, ci, err := c.src.ReadPacketData()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return time.Time{}, nil, io.EOF
		}
		return time.Time{}, nil, err
	}
	if c.ng != nil && ci.InterfaceIndex > 0 {
		intf, err := c.ng.Interface(ci.InterfaceIndex)
		if err != nil {
			return time.Time{}, nil, err
		}
		if err := checkLinkType(intf.LinkType); err != nil {
			return time.Time{}, nil, fmt.Errorf("interface %d: %w", ci.InterfaceIndex, err)
		}
	}
	return ci.Timestamp, data, nil
}

// ErrNoVIP: the VIP was not given and the capture has no SYN it could be
// learned from.
var ErrNoVIP = errors.New("no SYN to a listening port to learn the VIP from; give the VIP (-vip)")

// maxLearnFrames bounds how far into a capture a SYN is looked for.
const maxLearnFrames = 1 << 16

// frameSource yields a capture's frames.
type frameSource interface {
	Next() (time.Time, []byte, error)
}

type capturedFrame struct {
	at   time.Time
	data []byte
}

// learnVIP reads src up to the first SYN (without ACK) to one of ports
// and returns its destination, and a source that yields every frame of
// src from the start.
func learnVIP(src frameSource, ports []uint16) (netip.Addr, frameSource, error) {
	var read []capturedFrame
	var p wire.Packet
	for len(read) < maxLearnFrames {
		at, data, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return netip.Addr{}, nil, err
		}
		read = append(read, capturedFrame{at, data})
		if wire.Parse(data, &p) == nil && p.Kind == wire.KindTCP &&
			p.TCP.Flags()&(wire.TCPFlagSYN|wire.TCPFlagACK) == wire.TCPFlagSYN && slices.Contains(ports, p.TCP.DstPort()) {
			return p.IP.Dst().Addr(), &replayed{read: read, rest: src}, nil
		}
	}
	return netip.Addr{}, nil, fmt.Errorf("%w (ports %v, %d frames read)", ErrNoVIP, ports, len(read))
}

// replayed yields frames already read, then the rest of a source.
type replayed struct {
	read []capturedFrame
	rest frameSource
}

func (r *replayed) Next() (time.Time, []byte, error) {
	if len(r.read) > 0 {
		f := r.read[0]
		r.read[0] = capturedFrame{}
		r.read = r.read[1:]
		return f.at, f.data, nil
	}
	return r.rest.Next()
}
