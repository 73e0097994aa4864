-- Wireshark dissector for the qsplice control protocol (package proto).
--
--   wireshark -X lua_script:contrib/wireshark/qsplice.lua capture.pcapng
--   tshark -X lua_script:contrib/wireshark/qsplice.lua -r capture.pcapng -Y qsplice -V
--
-- or copy this file into Wireshark's personal plugins folder
-- (Help > About Wireshark > Folders), e.g. ~/.local/lib/wireshark/plugins/.
--
-- It takes UDP port 7400 (the daemons' default control port; the "UDP
-- port" preference changes it), is offered in Decode As for any other
-- UDP port, and finds datagrams on other ports heuristically (magic "QS",
-- version 3, a length that adds up).
--
-- Wire format (proto/doc.go): a 28-byte header (magic, version, type,
-- direction, reserved, body length, back-end id, incarnation, sequence
-- number), the body of the message type, and a 16-byte tag, the first
-- 16 bytes of HMAC-SHA256 under the key of the back-end the header names.
-- The dissector holds no key, so it shows the tag but cannot verify it:
-- a datagram shown here may be forged, and the daemons may have refused
-- it (their logs and /status count refusals by reason).
--
-- Field names: the header fields are qsplice.<name> (qsplice.version,
-- qsplice.type, qsplice.direction, qsplice.backend, qsplice.incarnation,
-- qsplice.seq, ...); a message field is qsplice.<message>.<field>, the Go
-- field name of package proto in snake case, e.g. qsplice.splice.request_id
-- for Splice.RequestID or qsplice.splice.w_scale_backend for
-- Splice.WScaleBackend. Every message that names a request also sets
-- qsplice.request_id, and every message sets qsplice.backend_id, so
-- "qsplice.request_id == N" finds a request's Splice, SpliceAck, Feedback
-- and Close at once. Durations (dur on the wire) are in nanoseconds.

local VERSION = 3
local HEADER_LEN = 28
local TAG_LEN = 16
local DEFAULT_PORT = 7400

local qs = Proto("qsplice", "qsplice control protocol")

local type_names = {
	[1] = "Register", [2] = "RegisterAck", [3] = "Splice", [4] = "SpliceAck",
	[5] = "Feedback", [6] = "Keepalive", [7] = "Close",
}
local direction_names = { [1] = "to-backend", [2] = "to-frontend" }
local close_reasons = { [1] = "FIN", [2] = "RST", [3] = "timeout", [4] = "backend-dead" }
local bool_names = { [0] = "false", [1] = "true" }

local f = {}
local fields = qs.fields
local function add_field(key, pf)
	f[key] = pf
	fields[#fields + 1] = pf
end

-- Header.
add_field("magic", ProtoField.string("qsplice.magic", "Magic"))
add_field("version", ProtoField.uint8("qsplice.version", "Version", base.DEC))
add_field("type", ProtoField.uint8("qsplice.type", "Type", base.DEC, type_names))
add_field("direction", ProtoField.uint8("qsplice.direction", "Direction", base.DEC, direction_names))
add_field("reserved", ProtoField.uint8("qsplice.reserved", "Reserved", base.HEX))
add_field("length", ProtoField.uint16("qsplice.length", "Body length", base.DEC))
add_field("backend", ProtoField.uint32("qsplice.backend", "Backend", base.DEC,
	nil, nil, "the sender if to-frontend, the recipient if to-backend"))
add_field("incarnation", ProtoField.uint64("qsplice.incarnation", "Incarnation", base.DEC,
	nil, nil, "the sender's"))
add_field("seq", ProtoField.uint64("qsplice.seq", "Seq", base.DEC, nil, nil, "the sender's sequence number"))
add_field("tag", ProtoField.bytes("qsplice.tag", "Tag"))
add_field("body", ProtoField.bytes("qsplice.body", "Body"))
add_field("trailing", ProtoField.bytes("qsplice.trailing", "Trailing bytes"))
add_field("undecoded", ProtoField.bytes("qsplice.undecoded", "Not decoded"))

-- Across messages: the request and the back-end a message names.
add_field("any_request_id", ProtoField.uint64("qsplice.request_id", "RequestID", base.DEC))
-- A Splice's extensions (pooled handoff connections, docs/pooled-c2.md):
-- a kind byte each, after everything else.
add_field("splice.ext", ProtoField.uint8("qsplice.splice.extension", "Extension", base.DEC,
	{ [1] = "Reuse", [2] = "CloseResponses", [3] = "Early" }))
add_field("splice.reuse_server_next", ProtoField.uint32("qsplice.splice.reuse_server_next", "Reuse.ServerNext", base.DEC))
add_field("splice.reuse_front_next", ProtoField.uint32("qsplice.splice.reuse_front_next", "Reuse.FrontNext", base.DEC))
add_field("splice.reuse_client_delta", ProtoField.uint32("qsplice.splice.reuse_client_delta", "Reuse.ClientDelta", base.DEC))
add_field("splice.reuse_client_ts_offset", ProtoField.uint32("qsplice.splice.reuse_client_ts_offset", "Reuse.ClientTSOffset", base.DEC))
add_field("splice.reuse_early", ProtoField.uint8("qsplice.splice.reuse_early", "Reuse.Early", base.DEC, bool_names))
add_field("splice.close_responses", ProtoField.uint8("qsplice.splice.close_responses", "CloseResponses", base.DEC, bool_names))
-- A Feedback's last byte: bit 0 CloseSent, bit 1 FINSent.
add_field("feedback.close_sent", ProtoField.uint8("qsplice.feedback.close_sent", "CloseSent", base.DEC, bool_names))
add_field("feedback.fin_sent", ProtoField.uint8("qsplice.feedback.fin_sent", "FINSent", base.DEC, bool_names))
add_field("any_backend_id", ProtoField.uint32("qsplice.backend_id", "BackendID", base.DEC))

-- Message fields, in wire order: {Go name, kind[, extra]}. Kinds follow
-- proto/doc.go: u8 u16 u32 u64 ipv4 mac dur bool flags closereason,
-- ports (u8 count then u16 each), reason (u8 length then bytes) and
-- request (u16 length then bytes).
local layouts = {
	[1] = { "register", {
		{ "BackendID", "u32" }, { "IP", "ipv4" }, { "MAC", "mac" }, { "ControlPort", "u16" },
		{ "Capacity", "u16" }, { "Incarnation", "u64" }, { "WebPorts", "ports" },
	} },
	[2] = { "registerack", {
		{ "BackendID", "u32" }, { "Incarnation", "u64" }, { "KeepaliveInterval", "dur" },
	} },
	[3] = { "splice", {
		{ "RequestID", "u64" }, { "Customer", "u32" },
		{ "ClientIP", "ipv4" }, { "ClientPort", "u16" }, { "VIP", "ipv4" }, { "VIPPort", "u16" },
		{ "HandoffIP", "ipv4" }, { "HandoffPort", "u16" }, { "BackendIP", "ipv4" }, { "BackendPort", "u16" },
		{ "SeqDelta", "u32" }, { "TSOffset", "u32" }, { "Flags", "flags" },
		{ "WScaleBackend", "u8" }, { "WScaleFrontend", "u8" }, { "ClientNextHopMAC", "mac" },
		{ "RequestEnd", "u32" }, { "BackendID", "u32" },
		-- Only with Flags bit 3 (the request's target was rewritten).
		{ "RewriteStart", "u32", "rewrite" }, { "RewriteEnd", "u32", "rewrite" },
		{ "RequestOffset", "u32", "rewrite" },
		-- Only with Flags bit 5 (the request carried for the shim to send).
		{ "RequestWindow", "u16", "request" }, { "RequestTSVal", "u32", "request" },
		{ "Request", "request", "request" },
	} },
	[4] = { "spliceack", {
		{ "RequestID", "u64" }, { "BackendID", "u32" }, { "OK", "bool" }, { "Reason", "reason" },
	} },
	[5] = { "feedback", {
		{ "BackendID", "u32" }, { "RequestID", "u64" }, { "ServiceTime", "dur" },
		{ "ResponseBytes", "u64" }, { "Concurrency", "u16" }, { "ResponseEnd", "u32" },
		-- Only when the shim reported it (the body is 8 bytes longer).
		{ "FirstByte", "dur", "optional" },
	} },
	[6] = { "keepalive", {
		{ "BackendID", "u32" }, { "Incarnation", "u64" }, { "Seq", "u64" }, { "Concurrency", "u16" },
	} },
	[7] = { "close", {
		{ "RequestID", "u64" }, { "BackendID", "u32" }, { "Reason", "closereason" },
	} },
}

-- snake turns a Go field name into its filter name: RequestID ->
-- request_id, ClientNextHopMAC -> client_next_hop_mac, VIPPort -> vip_port.
local function snake(name)
	local out = {}
	for i = 1, #name do
		local c = name:sub(i, i)
		local prev, nxt = name:sub(i - 1, i - 1), name:sub(i + 1, i + 1)
		if i > 1 and c:match("%u") and (prev:match("[%l%d]") or (prev:match("%u") and nxt:match("%l"))) then
			out[#out + 1] = "_"
		end
		out[#out + 1] = c:lower()
	end
	return table.concat(out)
end

local sizes = { u8 = 1, u16 = 2, u32 = 4, u64 = 8, ipv4 = 4, mac = 6, dur = 8, bool = 1, flags = 1, closereason = 1 }

for mtype, layout in pairs(layouts) do
	layout.type = mtype
	local msg, list = layout[1], layout[2]
	for _, fd in ipairs(list) do
		local go, kind = fd[1], fd[2]
		local abbr = "qsplice." .. msg .. "." .. snake(go)
		local key = msg .. "." .. go
		if kind == "u8" then
			add_field(key, ProtoField.uint8(abbr, go, base.DEC))
		elseif kind == "u16" then
			add_field(key, ProtoField.uint16(abbr, go, base.DEC))
		elseif kind == "u32" then
			add_field(key, ProtoField.uint32(abbr, go, base.DEC))
		elseif kind == "u64" then
			add_field(key, ProtoField.uint64(abbr, go, base.DEC))
		elseif kind == "dur" then
			add_field(key, ProtoField.uint64(abbr, go .. " (ns)", base.DEC))
		elseif kind == "ipv4" then
			add_field(key, ProtoField.ipv4(abbr, go))
		elseif kind == "mac" then
			add_field(key, ProtoField.ether(abbr, go))
		elseif kind == "bool" then
			add_field(key, ProtoField.uint8(abbr, go, base.DEC, bool_names))
		elseif kind == "closereason" then
			add_field(key, ProtoField.uint8(abbr, go, base.DEC, close_reasons))
		elseif kind == "flags" then
			add_field(key, ProtoField.uint8(abbr, go, base.HEX))
			add_field(key .. ".ts", ProtoField.bool(abbr .. ".timestamps", "Timestamps", 8, nil, 0x01))
			add_field(key .. ".sack", ProtoField.bool(abbr .. ".sack", "SACK", 8, nil, 0x02))
			add_field(key .. ".ws", ProtoField.bool(abbr .. ".window_scale", "Window scale", 8, nil, 0x04))
			add_field(key .. ".rewrite", ProtoField.bool(abbr .. ".rewrite", "Rewritten target", 8, nil, 0x08))
			add_field(key .. ".at_syn", ProtoField.bool(abbr .. ".at_syn", "Sent with the SYN", 8, nil, 0x10))
			add_field(key .. ".request", ProtoField.bool(abbr .. ".request", "Carries the request", 8, nil, 0x20))
			add_field(key .. ".implicit_ack", ProtoField.bool(abbr .. ".implicit_ack", "Acknowledged by the SYN-ACK", 8, nil, 0x40))
			add_field(key .. ".keeps_cookie", ProtoField.bool(abbr .. ".keeps_cookie", "The SYN asks for the front-end's own cookie", 8, nil, 0x80))
		elseif kind == "ports" then
			add_field(key .. ".count", ProtoField.uint8(abbr .. "_count", go .. " count", base.DEC))
			add_field(key, ProtoField.uint16(abbr, go, base.DEC))
		elseif kind == "reason" then
			add_field(key .. ".len", ProtoField.uint8(abbr .. "_len", go .. " length", base.DEC))
			add_field(key, ProtoField.string(abbr, go))
		elseif kind == "request" then
			add_field(key .. ".len", ProtoField.uint16(abbr .. "_len", go .. " length", base.DEC))
			add_field(key, ProtoField.bytes(abbr, go))
		end
	end
end

local ef_malformed = ProtoExpert.new("qsplice.malformed", "Malformed qsplice datagram",
	expert.group.MALFORMED, expert.severity.ERROR)
local ef_version = ProtoExpert.new("qsplice.unknown_version", "Unknown qsplice version",
	expert.group.UNDECODED, expert.severity.WARN)
local ef_type = ProtoExpert.new("qsplice.unknown_type", "Unknown qsplice message type",
	expert.group.UNDECODED, expert.severity.WARN)
local ef_tag = ProtoExpert.new("qsplice.tag_not_verified", "Tag not verified",
	expert.group.SECURITY, expert.severity.NOTE)
qs.experts = { ef_malformed, ef_version, ef_type, ef_tag }

qs.prefs.port = Pref.uint("UDP port", DEFAULT_PORT, "The control port of the daemons (-control)")

local function ns_text(v)
	-- v is a UInt64 of nanoseconds; show seconds too.
	local n = v:tonumber()
	if n < 1e3 then
		return string.format("%d ns", n)
	elseif n < 1e6 then
		return string.format("%.3f µs", n / 1e3)
	elseif n < 1e9 then
		return string.format("%.3f ms", n / 1e6)
	end
	return string.format("%.3f s", n / 1e9)
end

-- dissect_body adds the fields of message layout to tree from tvb's
-- range body (its offset and length); it returns a short summary for the
-- Info column. A body too short or too long is flagged, not fatal.
local function dissect_body(layout, tvb, tree, boff, blen)
	local msg, list = layout[1], layout[2]
	local off, stop = boff, boff + blen
	local summary = {}
	local flags = 0 -- the Splice's Flags, once read
	local function have(n, go)
		if off + n > stop then
			tree:add_proto_expert_info(ef_malformed,
				string.format("%s.%s truncated: needs %d bytes, %d left", type_names[layout.type] or msg, go, n, stop - off))
			return false
		end
		return true
	end
	for _, fd in ipairs(list) do
		local go, kind, when = fd[1], fd[2], fd[3]
		local key = msg .. "." .. go
		if (when == "rewrite" and bit32.band(flags, 0x08) == 0) or (when == "request" and bit32.band(flags, 0x20) == 0) or
			(when == "optional" and stop - off < (sizes[kind] or 1)) then
			-- not on the wire this time
		elseif kind == "ports" then
			if not have(1, go) then return summary end
			local n = tvb(off, 1):uint()
			local ci = tree:add(f[key .. ".count"], tvb(off, 1))
			off = off + 1
			if n > 64 then
				ci:add_proto_expert_info(ef_malformed, string.format("%d web ports, at most 64", n))
			end
			local ports = {}
			for _ = 1, n do
				if not have(2, go) then return summary end
				tree:add(f[key], tvb(off, 2))
				ports[#ports + 1] = tostring(tvb(off, 2):uint())
				off = off + 2
			end
			summary[#summary + 1] = "ports=" .. table.concat(ports, ",")
		elseif kind == "request" then
			if not have(2, go) then return summary end
			local n = tvb(off, 2):uint()
			local li = tree:add(f[key .. ".len"], tvb(off, 2))
			off = off + 2
			if n < 1 or n > 896 then
				li:add_proto_expert_info(ef_malformed, string.format("a carried request of %d bytes, 1 to 896", n))
			end
			if not have(n, go) then return summary end
			if n > 0 then
				tree:add(f[key], tvb(off, n))
				summary[#summary + 1] = string.format("request=%d bytes", n)
			end
			off = off + n
		elseif kind == "reason" then
			if not have(1, go) then return summary end
			local n = tvb(off, 1):uint()
			tree:add(f[key .. ".len"], tvb(off, 1))
			off = off + 1
			if not have(n, go) then return summary end
			if n > 0 then
				tree:add(f[key], tvb(off, n))
				summary[#summary + 1] = string.format("reason=%q", tvb(off, n):string())
			end
			off = off + n
		else
			local size = sizes[kind]
			if not have(size, go) then return summary end
			local r = tvb(off, size)
			local item = tree:add(f[key], r)
			if kind == "dur" then
				local v = r:uint64()
				item:append_text(" (" .. ns_text(v) .. ")")
				if v > UInt64(0xffffffff, 0x7fffffff) then
					item:add_proto_expert_info(ef_malformed, "does not fit a non-negative time.Duration")
				end
			elseif kind == "bool" and r:uint() > 1 then
				item:add_proto_expert_info(ef_malformed, "boolean byte must be 0 or 1")
			elseif kind == "closereason" and (r:uint() < 1 or r:uint() > 4) then
				item:add_proto_expert_info(ef_malformed, "unknown close reason")
			elseif kind == "flags" then
				item:add(f[key .. ".ts"], r)
				item:add(f[key .. ".sack"], r)
				item:add(f[key .. ".ws"], r)
				item:add(f[key .. ".rewrite"], r)
				item:add(f[key .. ".at_syn"], r)
				item:add(f[key .. ".request"], r)
				item:add(f[key .. ".implicit_ack"], r)
				item:add(f[key .. ".keeps_cookie"], r)
				flags = r:uint()
				if bit32.band(r:uint(), 0x80) ~= 0 and bit32.band(r:uint(), 0x40) == 0 then
					item:add_proto_expert_info(ef_malformed, "a cookie for the front-end (bit 7) without Fast Open (bit 6)")
				end
			elseif (go == "WScaleBackend" or go == "WScaleFrontend") and r:uint() > 14 then
				item:add_proto_expert_info(ef_malformed, "window scale above 14")
			end
			if go == "RequestID" then
				tree:add(f.any_request_id, r):set_generated()
				summary[#summary + 1] = "req=" .. tostring(r:uint64())
			elseif go == "BackendID" then
				tree:add(f.any_backend_id, r):set_generated()
			elseif go == "OK" then
				summary[#summary + 1] = "ok=" .. (bool_names[r:uint()] or tostring(r:uint()))
			elseif kind == "closereason" then
				summary[#summary + 1] = "reason=" .. (close_reasons[r:uint()] or tostring(r:uint()))
			end
			off = off + size
		end
	end
	if msg == "splice" then
		local last, reuse = 0, false
		while off < stop do
			local kind = tvb(off, 1):uint()
			if kind <= last or kind > 3 or (kind == 1 and off + 17 > stop) then
				break -- trailing bytes, flagged below
			end
			local ei = tree:add(f["splice.ext"], tvb(off, 1))
			off, last = off + 1, kind
			if kind == 1 then
				tree:add(f["splice.reuse_server_next"], tvb(off, 4))
				tree:add(f["splice.reuse_front_next"], tvb(off + 4, 4))
				tree:add(f["splice.reuse_client_delta"], tvb(off + 8, 4))
				tree:add(f["splice.reuse_client_ts_offset"], tvb(off + 12, 4))
				summary[#summary + 1] = "reuse"
				reuse = true
				off = off + 16
			elseif kind == 2 then
				tree:add(f["splice.close_responses"], tvb(off - 1, 1), 1)
				summary[#summary + 1] = "close"
			else
				tree:add(f["splice.reuse_early"], tvb(off - 1, 1), 1)
				if not reuse then
					ei:add_proto_expert_info(ef_malformed, "an early request without a reused C2")
				end
				summary[#summary + 1] = "early"
			end
		end
	elseif msg == "feedback" and stop - off == 1 then
		local v = tvb(off, 1):uint()
		tree:add(f["feedback.close_sent"], tvb(off, 1), bit32.band(v, 1))
		local fi = tree:add(f["feedback.fin_sent"], tvb(off, 1), bit32.rshift(bit32.band(v, 2), 1))
		if bit32.band(v, 1) == 0 or v > 3 then
			fi:add_proto_expert_info(ef_malformed, "only CloseSent (1), and FINSent (2) with it, may follow")
		end
		off = off + 1
	end
	if off < stop then
		tree:add(f.trailing, tvb(off, stop - off))
			:add_proto_expert_info(ef_malformed, string.format("%d bytes after the last field", stop - off))
	end
	return summary
end

function qs.dissector(tvb, pinfo, tree)
	local len = tvb:len()
	if len < 3 then
		return 0
	end
	pinfo.cols.protocol = "qsplice"
	local root = tree:add(qs, tvb(), "qsplice control protocol")
	local hdr = root:add(qs, tvb(0, math.min(len, HEADER_LEN)), "Header")
	hdr:add(f.magic, tvb(0, 2))
	if tvb(0, 2):string() ~= "QS" then
		root:add_proto_expert_info(ef_malformed, "bad magic, not a qsplice control datagram")
		pinfo.cols.info = "qsplice: bad magic"
		return len
	end
	local version = tvb(2, 1):uint()
	local vi = hdr:add(f.version, tvb(2, 1))
	root:append_text(", version " .. version)
	if version ~= VERSION then
		vi:add_proto_expert_info(ef_version,
			string.format("version %d: this dissector knows version %d only", version, VERSION))
		if len > 3 then
			root:add(f.undecoded, tvb(3))
		end
		pinfo.cols.info = string.format("qsplice version %d (not decoded)", version)
		return len
	end
	if len < HEADER_LEN then
		root:add_proto_expert_info(ef_malformed,
			string.format("%d bytes, shorter than the %d-byte header", len, HEADER_LEN))
		if len > 3 then
			root:add(f.undecoded, tvb(3))
		end
		pinfo.cols.info = "qsplice: short datagram"
		return len
	end

	local mtype = tvb(3, 1):uint()
	local dir = tvb(4, 1):uint()
	local blen = tvb(6, 2):uint()
	local tname = type_names[mtype] or string.format("Type(%d)", mtype)
	local dname = direction_names[dir] or string.format("Direction(%d)", dir)

	local ti = hdr:add(f.type, tvb(3, 1))
	local di = hdr:add(f.direction, tvb(4, 1))
	local ri = hdr:add(f.reserved, tvb(5, 1))
	hdr:add(f.length, tvb(6, 2))
	hdr:add(f.backend, tvb(8, 4))
	hdr:add(f.incarnation, tvb(12, 8))
	hdr:add(f.seq, tvb(20, 8))
	if not direction_names[dir] then
		di:add_proto_expert_info(ef_malformed, "direction must be 1 (to-backend) or 2 (to-frontend)")
	end
	if tvb(5, 1):uint() ~= 0 then
		ri:add_proto_expert_info(ef_malformed, "reserved byte must be 0")
	end
	root:append_text(string.format(", %s, %s, backend %d, seq %s", tname, dname,
		tvb(8, 4):uint(), tostring(tvb(20, 8):uint64())))

	local info = string.format("%s %s backend=%d seq=%s", tname, dname, tvb(8, 4):uint(), tostring(tvb(20, 8):uint64()))
	local have_body = math.min(blen, len - HEADER_LEN)
	local layout = layouts[mtype]
	if blen > 0 or layout then
		local body
		if have_body > 0 then
			body = root:add(qs, tvb(HEADER_LEN, have_body), tname)
		else
			body = root:add(qs, tvb(HEADER_LEN, 0), tname)
		end
		if not layout then
			ti:add_proto_expert_info(ef_type, string.format("message type %d is not one of version %d's", mtype, VERSION))
			if have_body > 0 then
				body:add(f.body, tvb(HEADER_LEN, have_body))
			end
		else
			local summary = dissect_body(layout, tvb, body, HEADER_LEN, have_body)
			if #summary > 0 then
				info = info .. " " .. table.concat(summary, " ")
			end
		end
	end
	pinfo.cols.info = info

	local tag_off = HEADER_LEN + blen
	if len < tag_off + TAG_LEN then
		root:add_proto_expert_info(ef_malformed,
			string.format("the header announces %d body bytes and a %d-byte tag: %d bytes, the datagram holds %d",
				blen, TAG_LEN, tag_off + TAG_LEN, len))
		return len
	end
	local tag = root:add(f.tag, tvb(tag_off, TAG_LEN))
	tag:append_text(" (tag not verified: HMAC-SHA256 needs the back-end's key)")
	tag:add_proto_expert_info(ef_tag, "tag not verified: the dissector holds no key")
	if len > tag_off + TAG_LEN then
		root:add(f.trailing, tvb(tag_off + TAG_LEN))
			:add_proto_expert_info(ef_malformed, string.format("%d bytes after the tag", len - tag_off - TAG_LEN))
	end
	return len
end

-- looks_like: magic, version 3, and a length that adds up exactly.
local function looks_like(tvb)
	local len = tvb:len()
	if len < HEADER_LEN + TAG_LEN then
		return false
	end
	if tvb(0, 2):string() ~= "QS" or tvb(2, 1):uint() ~= VERSION then
		return false
	end
	return HEADER_LEN + tvb(6, 2):uint() + TAG_LEN == len
end

local function heuristic(tvb, pinfo, tree)
	if not looks_like(tvb) then
		return false
	end
	qs.dissector(tvb, pinfo, tree)
	return true
end

local udp_port = DissectorTable.get("udp.port")
local registered_port = qs.prefs.port
udp_port:add(registered_port, qs)
qs:register_heuristic("udp", heuristic)

function qs.prefs_changed()
	if qs.prefs.port ~= registered_port then
		udp_port:remove(registered_port, qs)
		registered_port = qs.prefs.port
		udp_port:add(registered_port, qs)
	end
end
