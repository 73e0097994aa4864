package proto

import (
	"crypto/hkdf"
	"crypto/sha256"
	"hash"
	"strconv"
)

// Keys and tags on the receive path, without allocating.
//
// crypto/hmac builds a keyed hash per key (hmac.New allocates), which is
// fine for the one key of a back-end but not for the front-end: it holds
// only the master key and needs the key of whichever back-end a datagram
// claims to come from, before it knows the datagram is genuine. Deriving
// and keying there must cost no allocation, or a flood of forged
// datagrams with made-up back-end ids would cost the front-end memory.
// So this file computes HMAC-SHA256 (RFC 2104) and the one-block
// HKDF-Expand (RFC 5869) it needs by hand, over one reusable SHA-256
// state; the tests check both against crypto/hmac and crypto/hkdf.

// KeyLen is the length of the keys this package derives and generates:
// 256 bits, SHA-256's output.
const KeyLen = 32

// macKey is a key prepared for HMAC-SHA256: the key's block XOR ipad
// and XOR opad (RFC 2104). (Keeping the SHA-256 states after those
// blocks instead, as crypto/hmac does, saves two compressions, about
// 120 ns a tag here, but marshaling a state allocates under the race
// detector, and a refused datagram must allocate nothing in every
// build the tests run.)
type macKey struct {
	ipad, opad [sha256.BlockSize]byte
}

// set prepares key; a key longer than a block is hashed first (RFC 2104).
func (k *macKey) set(m *macer, key []byte) {
	var kb [sha256.BlockSize]byte // never handed to the hash: stays on the stack
	if len(key) > sha256.BlockSize {
		m.h.Reset()
		m.h.Write(key)
		copy(kb[:], m.h.Sum(m.sum[:0]))
	} else {
		copy(kb[:], key)
	}
	for i, b := range kb {
		k.ipad[i] = b ^ 0x36
		k.opad[i] = b ^ 0x5c
	}
}

// macer computes HMAC-SHA256 with any prepared key over one SHA-256
// state, into sum: nothing is allocated per call.
type macer struct {
	h     hash.Hash
	sum   [sha256.Size]byte
	block [sha256.BlockSize]byte // a pad, hashed from here: k's own would escape
	info  [64]byte               // derive's
}

func newMacer() *macer { return &macer{h: sha256.New()} }

// mac returns HMAC-SHA256(k, a || b) in m.sum, valid until the next call.
func (m *macer) mac(k *macKey, a, b []byte) []byte {
	m.block = k.ipad
	m.h.Reset()
	m.h.Write(m.block[:])
	m.h.Write(a)
	m.h.Write(b)
	inner := m.h.Sum(m.sum[:0])
	m.block = k.opad
	m.h.Reset()
	m.h.Write(m.block[:])
	m.h.Write(inner) // copied into the hash before Sum overwrites m.sum
	return m.h.Sum(m.sum[:0])
}

// keyInfo is the HKDF info string of back-end id's key.
func keyInfo(dst []byte, id uint32) []byte {
	dst = append(dst, "qsplice control v3 backend "...)
	return strconv.AppendUint(dst, uint64(id), 10)
}

// DeriveKey returns back-end id's key: HKDF-SHA256 of the master key
// with no salt and the info "qsplice control v3 backend <id>" (id in
// decimal), KeyLen bytes. The front-end holds the master key and derives
// each back-end's key from it; a back-end holds only its own, so it can
// speak for no other back-end.
func DeriveKey(master []byte, id uint32) ([]byte, error) {
	return hkdf.Key(sha256.New, master, nil, string(keyInfo(nil, id)), KeyLen)
}

// keyring is the front-end's source of back-end keys: the HKDF
// pseudorandom key of the master, prepared for HMAC, from which each
// back-end's key is one HMAC away (HKDF-Expand, one block).
type keyring struct {
	prk macKey
}

func newKeyring(m *macer, master []byte) (*keyring, error) {
	prk, err := hkdf.Extract(sha256.New, master, nil)
	if err != nil {
		return nil, err
	}
	r := &keyring{}
	r.prk.set(m, prk)
	return r, nil
}

// derive prepares back-end id's key in k, allocating nothing.
func (r *keyring) derive(m *macer, id uint32, k *macKey) {
	in := keyInfo(m.info[:0], id)
	in = append(in, 1) // HKDF-Expand: T(1) = HMAC(PRK, info || 0x01)
	key := m.mac(&r.prk, in, nil)
	k.set(m, key[:KeyLen]) // key is m.sum: set reads it before it hashes anything
}
