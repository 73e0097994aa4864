package link

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DisableOffloads turns off TX checksum offload, TSO, GSO and GRO on
// ifname, as `ethtool -K IF tx off tso off gso off gro off` does, plus
// hardware GRO and LRO, so that frames read with AF_PACKET carry complete
// checksums and are no larger than the MTU (docs/architecture.md §4, trap 11).
// It checks the result and fails naming any feature that stayed on (a
// feature the driver fixes on).
//
// It uses the SIOCETHTOOL feature-set commands with the kernel's own
// feature names. (The legacy ETHTOOL_STSO does not reach every TCP
// segmentation flag on current kernels, e.g. tx-tcp-accecn-segmentation.)
//
// It acts on the interface of that name in the network namespace of the
// calling thread, so call it inside the namespace owning the interface.
func DisableOffloads(ifname string) error {
	if len(ifname) >= unix.IFNAMSIZ {
		return fmt.Errorf("disable offloads on %s: name longer than %d bytes", ifname, unix.IFNAMSIZ-1)
	}
	// Any socket will do as a handle for the ioctl; its namespace selects
	// which interface the name refers to.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("disable offloads on %s: socket: %w", ifname, err)
	}
	defer unix.Close(fd)
	if err := disableFeatures(ethtoolHandle{fd, ifname}, isOffloadToDisable); err != nil {
		return fmt.Errorf("disable offloads on %s: %w", ifname, err)
	}
	return nil
}

// isOffloadToDisable selects, by kernel feature name, what ethtool's
// tx/tso/gso/gro keywords cover, plus the receive-side aggregations that
// also build super-frames.
func isOffloadToDisable(name string) bool {
	switch {
	case strings.HasPrefix(name, "tx-checksum-"): // tx
		return true
	case strings.HasPrefix(name, "tx-tcp") && strings.HasSuffix(name, "-segmentation"): // tso
		return true
	}
	switch name {
	case "tx-generic-segmentation", "rx-gro", "rx-gro-hw", "rx-lro": // gso, gro, hw gro, lro
		return true
	}
	return false
}

// Constants of <linux/ethtool.h> that golang.org/x/sys/unix lacks.
const (
	ethSSFeatures  = 4  // ETH_SS_FEATURES, the string set of feature names
	ethGStringLen  = 32 // ETH_GSTRING_LEN
	featureBlockSz = 32 // features per u32 block in ethtool_{g,s}features
)

// ethtoolHandle issues SIOCETHTOOL requests for one interface.
type ethtoolHandle struct {
	fd     int
	ifname string
}

// ifreqData is struct ifreq with the ifr_data member of its union, padded
// to the kernel's 40-byte size.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(unsafe.Pointer(nil))]byte
}

// call passes req, which starts with the u32 ethtool command, to the
// kernel. The ioctl's non-negative return value is returned (SFEATURES
// reports partial success in it).
func (h ethtoolHandle) call(req unsafe.Pointer) (uintptr, error) {
	var ifr ifreqData
	copy(ifr.name[:], h.ifname)
	ifr.data = req
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(h.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return 0, errno
	}
	return r, nil
}

// featureNames returns the kernel's feature names, indexed by feature bit.
func (h ethtoolHandle) featureNames() ([]string, error) {
	info := struct {
		cmd, reserved uint32
		mask          uint64
		count         uint32
	}{cmd: unix.ETHTOOL_GSSET_INFO, mask: 1 << ethSSFeatures}
	if _, err := h.call(unsafe.Pointer(&info)); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: %w", err)
	}
	if info.mask == 0 || info.count == 0 {
		return nil, errors.New("kernel reports no feature names")
	}
	// struct ethtool_gstrings: cmd, string_set, len, then len 32-byte names.
	buf := make([]uint32, 3+int(info.count)*ethGStringLen/4)
	buf[0], buf[1], buf[2] = unix.ETHTOOL_GSTRINGS, ethSSFeatures, info.count
	if _, err := h.call(unsafe.Pointer(&buf[0])); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err)
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&buf[3])), int(info.count)*ethGStringLen)
	names := make([]string, info.count)
	for i := range names {
		s := raw[i*ethGStringLen : (i+1)*ethGStringLen]
		if end := bytes.IndexByte(s, 0); end >= 0 {
			s = s[:end]
		}
		names[i] = string(s)
	}
	return names, nil
}

// activeFeatures returns the bit mask of features currently on, as u32
// blocks (struct ethtool_gfeatures: cmd, size, then per block available,
// requested, active, never_changed).
func (h ethtoolHandle) activeFeatures(blocks int) ([]uint32, error) {
	buf := make([]uint32, 2+4*blocks)
	buf[0], buf[1] = unix.ETHTOOL_GFEATURES, uint32(blocks)
	if _, err := h.call(unsafe.Pointer(&buf[0])); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GFEATURES: %w", err)
	}
	active := make([]uint32, blocks)
	for b := range active {
		active[b] = buf[2+4*b+2]
	}
	return active, nil
}

// disableFeatures turns off every feature whose name selected returns
// true, then reads the features back and names those still on.
func disableFeatures(h ethtoolHandle, selected func(string) bool) error {
	names, err := h.featureNames()
	if err != nil {
		return err
	}
	blocks := (len(names) + featureBlockSz - 1) / featureBlockSz
	// struct ethtool_sfeatures: cmd, size, then per block valid, requested.
	// requested stays zero: every valid bit is asked to be off.
	req := make([]uint32, 2+2*blocks)
	req[0], req[1] = unix.ETHTOOL_SFEATURES, uint32(blocks)
	for bit, name := range names {
		if selected(name) {
			req[2+2*(bit/featureBlockSz)] |= 1 << (bit % featureBlockSz)
		}
	}
	// A positive return (ETHTOOL_F_UNSUPPORTED and friends) only says some
	// bits are fixed; the read-back below decides whether that matters.
	if _, err := h.call(unsafe.Pointer(&req[0])); err != nil {
		return fmt.Errorf("ETHTOOL_SFEATURES: %w", err)
	}
	active, err := h.activeFeatures(blocks)
	if err != nil {
		return err
	}
	var stuck []string
	for bit, name := range names {
		if selected(name) && active[bit/featureBlockSz]&(1<<(bit%featureBlockSz)) != 0 {
			stuck = append(stuck, name)
		}
	}
	if len(stuck) > 0 {
		return fmt.Errorf("features still on (fixed by the driver?): %s", strings.Join(stuck, ", "))
	}
	return nil
}
