package splice

import "encoding/binary"

// What a SYN answer outside the engine needs to make the engine's
// cookies (splice/link/synanswer.go, frontend/synanswer.go): the key of
// an epoch as SipHash takes it, and the MSS encoding. The daemon derives
// the keys from the secret it gives its engines, so every shard and the
// program make and check the same cookies.

// CookieKeyOf returns the SipHash key (k0, k1) the engine's cookies of
// epoch use, from the engine's secret (FrontEndConfig.CookieSecret): the
// little-endian loads of the first 16 bytes of the epoch's key, as
// cookieMAC takes them.
func CookieKeyOf(secret *[32]byte, epoch int64) (k0, k1 uint64) {
	k := deriveCookieKey(secret, epoch)
	return binary.LittleEndian.Uint64(k[0:8]), binary.LittleEndian.Uint64(k[8:16])
}

// CookieMSSTable returns the MSS values a cookie can name, ascending
// (the index of the largest not above the client's MSS is encoded, 0 when
// it is below them all), and the MSS taken for a SYN without the option.
func CookieMSSTable() ([8]uint16, uint16) { return cookieMSS, cookieDefaultMSS }
