package replay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
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
