package splice

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

// windowsOffer is what a client without timestamps offers (Windows by
// default): the cookie then carries the options in its own bits.
func windowsOffer() wire.SynOptions {
	return wire.SynOptions{MSS: 1460, WScale: 8, SACKPermitted: true}
}

// cookieOffers are the two cookie layouts: options in the ISN, and
// options in our TSval.
var cookieOffers = []struct {
	name  string
	offer wire.SynOptions
}{{"no-timestamps", windowsOffer()}, {"timestamps", fullOffer(77)}}

// finalACK is client c's final handshake ACK for SYN-ACK sa, carrying
// payload: what an attacker on the path captures.
func finalACK(c *testClient, sa *seen, payload []byte) []byte {
	var opts []byte
	if val, _, ok := sa.ts(); ok {
		opts = segOpts(&[2]uint32{c.tsVal + 1, val})
	}
	return c.frame(wire.TCPFlagACK|wire.TCPFlagPSH, c.isn+1, sa.seq()+1, opts, payload)
}

// A captured final ACK with its request makes a connection once. Replayed
// any later than the cookie's lifetime (two epochs, at most 128 s) it is
// refused: at +34 min and every multiple, where the old 5-bit slot counter
// wrapped into acceptance, and in between.
func TestAdversarialCookieReplayIsRefusedAfterItsLifetime(t *testing.T) {
	for _, tc := range cookieOffers {
		t.Run(tc.name, func(t *testing.T) {
			h := newFE(t, nil)
			c := newClient(42000, 0x7a7a7a7a, tc.offer)
			sa := expectTCP(t, onlyFrame(t, h.input(c.syn(), t0)))
			captured := finalACK(c, sa, []byte(shortRequest))
			out := h.input(captured, t0+ms)
			onlyEvent(t, out, EvRequest) // the genuine use

			const wrap = 2048 * s1 // 32 slots of 64 s: 34 min 8 s
			for k := Time(1); k <= 12; k++ {
				for _, d := range []Time{0, 60 * s1, 127 * s1, -5 * 64 * s1} {
					at := t0 + k*wrap + d
					h := newFE(t, nil) // the same secret, as after any wait (keys derive from it and the time)
					out := h.input(captured, at)
					if h.fe.Flows() != 0 || len(eventsOf(out, EvRequest)) != 0 {
						t.Fatalf("replay at t0+%v accepted: the request was scheduled again", time.Duration(at-t0))
					}
					if dropsNamed(h, "bad-cookie") != 1 {
						t.Errorf("replay at t0+%v: bad-cookie drops = %d", time.Duration(at-t0), dropsNamed(h, "bad-cookie"))
					}
				}
			}
			// Within its lifetime (t0 is 40 s into its epoch, the next
			// ends 88 s later) it still works: what a retransmitted final
			// ACK needs.
			h2 := newFE(t, nil)
			onlyEvent(t, h2.input(captured, t0+87*s1), EvRequest)
		})
	}
}

// A forger who knows everything but the keyed bits (the epoch bit and, for
// its own options, the option bits, from a SYN-ACK it asked for itself)
// guesses the rest: for a spoofed source it never sees the SYN-ACK of,
// exactly one value of the keyed bits is right, so a guess succeeds with
// probability 2^-k. The test checks k (23 without timestamps, 31 with;
// the old cookie had 18, found after about 185,000 guesses) and that one
// value only verifies: the low 16 keyed bits enumerated with the others
// given away, and each higher keyed bit flipped alone. 2^20 random
// guesses would expect 2^-3 hits at 23 bits and 2^-11 at 31 (4 at 18).
func TestAdversarialCookieForgeryNeedsTheWidenedMAC(t *testing.T) {
	cases := []struct {
		name    string
		offer   wire.SynOptions
		minBits int
	}{
		{"no-timestamps", windowsOffer(), 23},
		{"timestamps", fullOffer(77), 31},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFE(t, nil)
			victim := newClient(5555, 0x600d, tc.offer)
			victim.ip = ip4("198.19.9.9") // spoofed: it never sees the SYN-ACK
			sa := expectTCP(t, onlyFrame(t, h.input(victim.syn(), t0)))
			ft := fourTuple{srcIP: victim.ip, dstIP: vipA, srcPort: victim.port, dstPort: webPort}
			tsEcr, _, hasTS := sa.ts()
			genuine := sa.seq()
			k := cookieKeyedBits(hasTS)
			if k < tc.minBits {
				t.Errorf("%d keyed bits: a forger needs 2^%d guesses on average, want at least 2^%d", k, k, tc.minBits)
			}
			try := func(guess wire.Seq) bool { return tryCookie(h, t0+ms, ft, guess+1, victim.isn+1, hasTS, tsEcr) }
			const low = 1<<16 - 1
			for m := range wire.Seq(low + 1) {
				if guess := genuine&^low | m; guess != genuine && try(guess) {
					t.Fatalf("forged cookie %#x verifies (genuine %#x)", uint32(guess), uint32(genuine))
				}
			}
			for bit := 16; bit < k; bit++ {
				if try(genuine ^ 1<<bit) {
					t.Fatalf("cookie with keyed bit %d flipped verifies", bit)
				}
			}
			if !try(genuine) {
				t.Fatalf("the genuine cookie is refused: the guesses were not tried against a valid layout")
			}
		})
	}
}

// Bad final ACKs get RSTs at a bounded rate (1000/s, bursts of 100): a
// flood of them is not reflected one for one.
func TestAdversarialBadACKResetsAreRateLimited(t *testing.T) {
	h := newFE(t, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	// flood sends n bad ACKs from start, one every gap.
	flood := func(start, gap Time, n int) (rsts int) {
		for i := range n {
			c := newClient(uint16(1024+i%60000), wire.Seq(rng.Uint32()), fullOffer(1))
			out := h.input(c.frame(wire.TCPFlagACK, c.isn+1, wire.Seq(rng.Uint32()), nil, nil), start+Time(i)*gap)
			rsts += len(out.Frames)
		}
		return rsts
	}
	first := flood(t0, 0, 5000)
	if first != 100 {
		t.Errorf("5000 bad ACKs at once got %d RSTs, want the burst of 100", first)
	}
	second := flood(t0+s1, 200*Time(time.Microsecond), 5000) // 5000/s for a second
	if second < 1000 || second > 1100 {
		t.Errorf("5000 bad ACKs over a second got %d RSTs, want 1000 and at most a burst more", second)
	}
	if got := suppressedRSTs(h); got != uint64(10000-first-second) {
		t.Errorf("RSTs suppressed counted %d, want %d", got, 10000-first-second)
	}
	h.checkCounters()
}

// A client's MSS is never raised: the cookie names the largest table
// entry not above it, and below the smallest entry the smallest. The old
// table started at 536.
func TestAdversarialSmallClientMSSIsNotRaised(t *testing.T) {
	smallest := cookieMSSTable()[0]
	if smallest > 88 {
		t.Fatalf("the smallest MSS a cookie can name is %d: smaller client MSS values are raised to it", smallest)
	}
	// The common values come through as they are, or nearly.
	exact := map[uint16]uint16{536: 536, 1220: 1220, 1440: 1440, 1452: 1440, 1460: 1460, 8960: 8960, 9000: 8960}
	for _, mss := range []uint16{1, 40, 64, 88, 100, 216, 300, 535, 536, 1000, 1220, 1300, 1440, 1452, 1460, 1500, 8960, 9000, 65535} {
		h := newFE(t, nil)
		c := newClient(40002, 0x0badcafe, wire.SynOptions{MSS: mss, WScale: -1})
		id := queuedRequest(t, h, c, shortRequest)
		syn := dispatch(t, h, id, t0+2*ms)
		opt, ok := syn.option(layers.TCPOptionKindMSS)
		if !ok {
			t.Fatalf("client MSS %d: C2 SYN without MSS", mss)
		}
		got := binary.BigEndian.Uint16(opt.OptionData)
		switch {
		case mss >= smallest && got > mss:
			t.Errorf("client MSS %d raised to %d on C2", mss, got)
		case mss < smallest && got != smallest:
			t.Errorf("client MSS %d below the table became %d, want the smallest entry %d", mss, got, smallest)
		}
		if want, ok := exact[mss]; ok && got != want {
			t.Errorf("client MSS %d became %d, want %d", mss, got, want)
		}
	}
}

// tryCookie runs the front-end's cookie check on a final ACK's numbers.
func tryCookie(h *feHarness, now Time, ft fourTuple, ack, seq wire.Seq, ts bool, tsEcr uint32) bool {
	_, ok := h.fe.cookies.check(now, ft, ack, seq, ts, tsEcr)
	return ok
}

func suppressedRSTs(h *feHarness) uint64 { return h.fe.Stats().RSTsSuppressed }

func cookieMSSTable() []uint16 { return cookieMSS[:] }

// withCookieISNAbove returns a configuration change whose cookie secret
// makes the front-end's ISN for p's connection at least floor: a test
// that needs sequence numbers near 2^32 picks its secret (one in 2^k
// secrets does for a floor with k leading ones).
func withCookieISNAbove(tb testing.TB, floor wire.Seq, p spliceParams) func(*FrontEndConfig) {
	tb.Helper()
	var pkt wire.Packet
	var o wire.TCPOptions
	if err := wire.Parse(newClient(testRequestPort, p.clientISN, p.offer).syn(), &pkt); err != nil {
		tb.Fatal(err)
	}
	if err := wire.ParseOptions(pkt.TCP, &o); err != nil {
		tb.Fatal(err)
	}
	ft := fourTuple{srcIP: clientIP, dstIP: vipA, srcPort: testRequestPort, dstPort: webPort}
	secret := testFrontEndConfig(nil).CookieSecret
	for i := range uint32(1 << 20) {
		binary.BigEndian.PutUint32(secret[:], i)
		k := newCookieKeys(secret)
		if isn, _ := k.make(p.start, ft, p.clientISN, &o); isn >= floor {
			return func(c *FrontEndConfig) { c.CookieSecret = secret }
		}
	}
	tb.Fatalf("no cookie secret gives an ISN above %#x", uint32(floor))
	return nil
}

// FuzzCookie checks the cookie both ways. Any final ACK's numbers may be
// checked without a panic, and what verifies names a table MSS and a
// valid window scale. A cookie made for any SYN verifies at once and a
// second later with exactly what the SYN offered (its MSS never raised
// above the smallest entry), and our TSval stays at or below the clock;
// with timestamps (31 keyed bits, where a chance match is out of reach)
// it no longer verifies two epochs on.
func FuzzCookie(f *testing.F) {
	f.Add(uint32(0xc6130707), uint16(40000), uint32(0x1000), uint32(0xdeadbeef), uint32(7), true, int64(t0), uint16(1460), uint8(7), true, true)
	f.Add(uint32(1), uint16(1), uint32(0xffffffff), uint32(0), uint32(0xffffffff), false, int64(0), uint16(0), uint8(0), false, false)
	f.Add(uint32(0x7f000001), uint16(65535), uint32(0x80000000), uint32(1), uint32(0), true, int64(cookieEpoch), uint16(40), uint8(255), false, true)
	f.Fuzz(func(t *testing.T, src uint32, sport uint16, isn, ack, tsEcr uint32, ts bool, at int64, mss uint16, ws uint8, sack, hasMSS bool) {
		now := Time(max(at, 0) % (1 << 50))
		var ip wire.IP4
		binary.BigEndian.PutUint32(ip[:], src)
		ft := fourTuple{srcIP: ip, dstIP: vipA, srcPort: sport, dstPort: webPort}
		k := newCookieKeys(testFrontEndConfig(nil).CookieSecret)

		if info, ok := k.check(now, ft, wire.Seq(ack), wire.Seq(isn), ts, tsEcr); ok {
			if info.wscale < -1 || info.wscale > wire.MaxWScale || cookieMSSIndex(info.mss) >= uint32(len(cookieMSS)) || cookieMSS[cookieMSSIndex(info.mss)] != info.mss {
				t.Fatalf("verified cookie says %+v", info)
			}
		}

		// ws's top bit says "no window scale"; the rest is the shift, up
		// to 127 (a client may offer more than 14; 14 is used).
		o := wire.TCPOptions{MSS: mss, HasMSS: hasMSS, WScale: ws & 0x7f, HasWScale: ws < 0x80, SACKPermitted: sack, HasTS: ts}
		cookie, tsval := k.make(now, ft, wire.Seq(isn), &o)
		if ts && (tsClock(now)-tsval >= 1<<cookieOptBits || tsval&cookieOptMask != cookieOptions(&o)) {
			t.Fatalf("TSval %#x for clock %#x and option bits %#x", tsval, tsClock(now), cookieOptions(&o))
		}
		for _, later := range []Time{now, now + s1} {
			info, ok := k.check(later, ft, cookie+1, wire.Seq(isn)+1, ts, tsval)
			if !ok {
				t.Fatalf("cookie %#x made at %d refused at %d", uint32(cookie), now, later)
			}
			want := uint16(cookieDefaultMSS)
			if hasMSS {
				want = mss
			}
			wantWS := -1
			if o.HasWScale {
				wantWS = int(min(o.WScale, wire.MaxWScale))
			}
			if want >= cookieMSS[0] && info.mss > want || want < cookieMSS[0] && info.mss != cookieMSS[0] ||
				info.wscale != wantWS || info.sack != sack || info.ts != ts || info.clientISN != wire.Seq(isn) {
				t.Fatalf("cookie for MSS %d ws %d sack %v ts %v came back as %+v", want, wantWS, sack, ts, info)
			}
		}
		if ts {
			if _, ok := k.check(now+2*cookieEpoch, ft, cookie+1, wire.Seq(isn)+1, ts, tsval); ok {
				t.Fatalf("cookie made at %d still verifies two epochs on", now)
			}
		}
	})
}

// The epoch keys are HMAC-SHA-256 as crypto/hmac computes it.
func TestCookieKeyIsHMAC(t *testing.T) {
	secret := testFrontEndConfig(nil).CookieSecret
	for _, ep := range []int64{0, 1, 15, 1 << 40} {
		m := hmac.New(sha256.New, secret[:])
		m.Write([]byte(cookieKeyLabel))
		binary.Write(m, binary.BigEndian, ep)
		if got := deriveCookieKey(&secret, ep); !hmac.Equal(got[:], m.Sum(nil)) {
			t.Errorf("epoch %d: key %x, HMAC %x", ep, got, m.Sum(nil))
		}
	}
}

// TestCookieKeyIsTheEngines: the key CookieKeyOf exports for the link's
// program is the one the engine makes its cookies with. The MAC of each
// SYN-ACK's cookie is computed here as the program computes it, from the
// exported key halves and the three words cookieMAC documents (not by
// cookieMAC), with timestamps and without.
func TestCookieKeyIsTheEngines(t *testing.T) {
	h := newFE(t, nil)
	now := 100*CookieEpoch + 7*s1
	epoch := CookieEpochOf(now)
	k0, k1 := CookieKeyOf(&h.cfg.CookieSecret, epoch)
	if p0, p1 := CookieKeyOf(&h.cfg.CookieSecret, epoch-1); p0 == k0 || p1 == k1 {
		t.Fatal("consecutive epochs have the same key")
	}
	be32 := func(a wire.IP4) uint64 { return uint64(binary.BigEndian.Uint32(a[:])) }
	for i, offer := range []wire.SynOptions{windowsOffer(), fullOffer(77)} {
		c := newClient(4000+uint16(i), 0xdeadbeef, offer)
		sa := expectTCP(t, onlyFrame(t, h.input(c.syn(), now)), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
		isn := uint32(sa.seq())
		if isn>>31 != uint32(epoch&1) {
			t.Errorf("cookie %#x: parity bit, want epoch %d's", isn, epoch)
		}
		tsval, _, ts := sa.ts()
		opts, mac, keyed := isn>>cookieMACBits&cookieOptMask, isn&(1<<cookieMACBits-1), cookieMACBits
		if ts {
			opts, mac, keyed = tsval&cookieOptMask, isn&^(1<<31), cookieMACBitsT
		}
		w0 := be32(c.ip)<<32 | be32(c.vip)
		w1 := uint64(c.port)<<48 | uint64(c.vport)<<32 | uint64(uint32(c.isn))
		w2 := uint64(epoch)<<16 | uint64(opts)<<8
		if ts {
			w2 |= 1
		}
		if want := uint32(sipHash24(k0, k1, w0, w1, w2)>>32) >> (32 - keyed); mac != want {
			t.Errorf("timestamps %v: the cookie's MAC %#x, from the exported key %#x", ts, mac, want)
		}
	}
	if h.fe.cookies.epoch != epoch || h.fe.cookies.cur != deriveCookieKey(&h.cfg.CookieSecret, epoch) {
		t.Errorf("the engine's keys are those of epoch %d, want %d", h.fe.cookies.epoch, epoch)
	}
}

// Keys rotate with the epoch: consecutive epochs keep the previous key
// without deriving it again, and a jump derives both.
func TestCookieKeysRotateWithTheEpoch(t *testing.T) {
	secret := testFrontEndConfig(nil).CookieSecret
	k := newCookieKeys(secret)
	for _, now := range []Time{t0, t0 + cookieEpoch, t0 + 5*cookieEpoch, t0} {
		k.at(now)
		ep := int64(now / cookieEpoch)
		if k.epoch != ep || k.cur != deriveCookieKey(&secret, ep) || k.prev != deriveCookieKey(&secret, ep-1) {
			t.Fatalf("at %d: epoch %d, keys not those of epochs %d and %d", now, k.epoch, ep, ep-1)
		}
	}
	// A cookie made in epoch 1 is refused in epoch 0: its parity names
	// epoch -1 there, which has no key.
	k = newCookieKeys(secret)
	var o wire.TCPOptions
	cookie, _ := k.make(cookieEpoch+s1, fourTuple{}, 1, &o)
	if _, ok := k.check(s1, fourTuple{}, cookie+1, 2, false, 0); ok {
		t.Errorf("a cookie of epoch 1 verified in epoch 0")
	}
}

// Making and checking cookies allocates nothing, key rotation included.
func TestCookiesAllocateNothing(t *testing.T) {
	k := newCookieKeys(testFrontEndConfig(nil).CookieSecret)
	o := wire.TCPOptions{MSS: 1460, HasMSS: true, HasTS: true}
	now := t0
	ok := 0
	allocs := testing.AllocsPerRun(100, func() {
		now += cookieEpoch / 3 // a new key every third round
		c, tsval := k.make(now, fourTuple{}, 9, &o)
		if _, good := k.check(now, fourTuple{}, c+1, 10, true, tsval); good {
			ok++
		}
	})
	if allocs != 0 || ok != 101 {
		t.Errorf("%v allocations, %d of 101 cookies verified", allocs, ok)
	}
}

// BenchmarkCookieCheck is what one guessed final ACK costs the front-end
// to refuse (the RST aside): one SipHash-2-4 of three words, the epoch's
// keys already derived.
func BenchmarkCookieCheck(b *testing.B) {
	k := newCookieKeys(testFrontEndConfig(nil).CookieSecret)
	ft := fourTuple{srcIP: clientIP, dstIP: vipA, srcPort: 1, dstPort: webPort}
	var bad int
	for b.Loop() {
		if _, ok := k.check(t0, ft, 12345, 678, false, 0); !ok {
			bad++
		}
	}
	if bad == 0 {
		b.Fatal("no cookie was refused: the path measured is not the check")
	}
}
