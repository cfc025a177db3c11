-- SDR (software-defined reliability for RDMA, arXiv 2505.05366) for Wireshark and tshark 4.x,
-- Lua 5.2. Reads what the code writes:
--
--  * Data: every SDR packet is an InfiniBand UC RDMA WRITE Only with Immediate (BTH opcode 0x2B,
--    RoCEv2 UDP 4791) whose 32-bit ImmDt is [message id | packet offset | user-immediate
--    fragment], most significant first (firmware/include/sdr/firmware/imm.h, fw_imm_encode;
--    default split 10 + 18 + 4). A post-dissector adds the `sdr` tree: sdr.msg_id,
--    sdr.pkt_offset, sdr.imm_frag, the derived sdr.chunk, and "retransmission" expert info.
--  * Control: the reliability layer's CTS/ACK/NACK/REQ/ABORT travel as UD SEND Only (0x64, or
--    0x65 with ImmDt) with a DETH, to a control QP (QPN bit 23 set). A heuristic on the
--    InfiniBand payload dissects the 48-byte little-endian header, version 2's scheme
--    parameter area (ec-lt's robust soliton c and delta) and the chunk bitmap
--    (reliability/include/sdr/reliability/ctrl_msg.hpp); malformed input is an expert error.
--
-- Use: tshark -X lua_script:sdr.lua -r capture.pcap, or copy this file and the scheme registry
-- sdr_rel_schemes.def (installed beside it) into Wireshark's personal Lua plugin folder
-- (Help > About > Folders; ~/.local/lib/wireshark/plugins/).
-- Preferences (Edit > Preferences > Protocols > SDR, or tshark -o sdr.NAME:VALUE): the
-- immediate split, the chunk size and the MTU, all with the project's defaults.

local sdr = Proto("sdr", "Software-Defined Reliability (SDR)")

---------------------------------------------------------------------------------------------
-- Preferences: what a user configured in sdr_qp_attr (chunk size and MTU in bytes, as the
-- C API takes them; the immediate split as the firmware's fw_imm_layout).
sdr.prefs.msg_bits = Pref.uint("Message id bits", 10, "Bits of the message id in the immediate (most significant)")
sdr.prefs.offset_bits = Pref.uint("Packet offset bits", 18, "Bits of the packet offset in the immediate (middle)")
sdr.prefs.frag_bits = Pref.uint("Immediate fragment bits", 4,
    "Bits of the user-immediate fragment in the immediate (least significant); 1, 2, 4, 8 or 16")
sdr.prefs.chunk_bytes = Pref.uint("Chunk size (bytes)", 65536, "Bytes per chunk: one bit of the receive bitmap")
sdr.prefs.mtu_bytes = Pref.uint("MTU (bytes)", 4096, "Payload bytes per packet (the QP's MTU)")

---------------------------------------------------------------------------------------------
-- Fields
local f = {}
-- data packets
f.msg_id = ProtoField.uint32("sdr.msg_id", "Message id")
f.pkt_offset = ProtoField.uint32("sdr.pkt_offset", "Packet offset")
f.imm_frag = ProtoField.uint32("sdr.imm_frag", "User-immediate fragment", base.HEX)
f.imm_frag_index = ProtoField.uint32("sdr.imm_frag_index", "Fragment index in the user immediate")
f.chunk = ProtoField.uint32("sdr.chunk", "Chunk")
f.padding = ProtoField.bool("sdr.padding", "Padding packet (zero-length, carries an immediate fragment)")
f.msg_first_frame = ProtoField.framenum("sdr.msg_first_frame", "First frame of this message")
f.retransmission = ProtoField.bool("sdr.retransmission", "Retransmission")
f.retrans_of = ProtoField.framenum("sdr.retransmission.of_frame", "Earlier copy in frame")
f.retrans_why = ProtoField.string("sdr.retransmission.why", "Why")
-- control datagrams
local types = { [1] = "CTS", [2] = "ACK", [3] = "NACK", [4] = "REQ", [5] = "ABORT" }

-- The schemes' wire ids and names come from the library's registry, sdr_rel_schemes.def (one
-- `SDR_REL_SCHEME(id, "name", C, Cxx)` line per scheme), so that a new scheme needs no edit
-- here: the copy installed beside this script (share/sdr/wireshark), else the source tree's.
-- Auto (5) is no scheme of the registry but the receiver's choice.
local function read_schemes()
    local here = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or ""
    local places = { here .. "sdr_rel_schemes.def", here .. "../../reliability/include/sdr_rel_schemes.def" }
    for _, path in ipairs(places) do
        local file = io.open(path, "r")
        if file then
            local names = { [5] = "auto" }
            for line in file:lines() do
                local id, name = line:match('^SDR_REL_SCHEME%(%s*(%d+)%s*,%s*"([^"]+)"')
                if id then names[tonumber(id)] = name end
            end
            file:close()
            return names
        end
    end
    error("sdr.lua: the scheme table sdr_rel_schemes.def is in none of " .. table.concat(places, ", ") ..
        "; copy it from the install's share/sdr/wireshark or include/ next to sdr.lua")
end
local schemes = read_schemes()
local scheme_id = {}
for id, name in pairs(schemes) do scheme_id[name] = id end

f.ctrl = ProtoField.none("sdr.ctrl", "Control message")
f.version = ProtoField.uint8("sdr.ctrl.version", "Version")
f.type = ProtoField.uint8("sdr.ctrl.type", "Type", base.DEC, types)
f.flags = ProtoField.uint8("sdr.ctrl.flags", "Flags", base.HEX)
f.final = ProtoField.bool("sdr.ctrl.flags.final", "FINAL (whole, delivered)", 8, nil, 0x01)
f.failed = ProtoField.bool("sdr.ctrl.flags.failed", "FAILED", 8, nil, 0x02)
f.repair = ProtoField.bool("sdr.ctrl.flags.repair", "REPAIR (NACK: submessages that need repair symbols)", 8, nil, 0x04)
f.reply = ProtoField.bool("sdr.ctrl.flags.reply", "REPLY (ACK: the answer to a REQ)", 8, nil, 0x08)
f.scheme = ProtoField.uint8("sdr.ctrl.scheme", "Scheme", base.DEC, schemes)
f.k = ProtoField.uint8("sdr.ctrl.k", "k (data chunks per submessage)")
f.m = ProtoField.uint8("sdr.ctrl.m", "m (parity chunks per submessage)")
f.reserved = ProtoField.uint16("sdr.ctrl.reserved", "Reserved", base.HEX)
-- version 2: a parameter area of P bytes after the header (P in bytes 6..7, where version 1 has
-- its reserved field), the scheme's parameters for the clear-to-send
f.params_len = ProtoField.uint16("sdr.ctrl.params_len", "Parameter bytes (P)")
f.params = ProtoField.bytes("sdr.ctrl.params", "Scheme parameters")
f.lt_c = ProtoField.uint16("sdr.ctrl.lt.c", "ec-lt robust soliton c (thousandths)")
f.lt_delta = ProtoField.uint16("sdr.ctrl.lt.delta", "ec-lt robust soliton delta (thousandths)")
f.seq = ProtoField.uint64("sdr.ctrl.seq", "Sequence (reliable message number)")
f.length = ProtoField.uint64("sdr.ctrl.length", "Length (bytes)")
f.base = ProtoField.uint32("sdr.ctrl.base", "Base chunk")
f.nbits = ProtoField.uint32("sdr.ctrl.nbits", "Bitmap bits")
f.newest = ProtoField.uint32("sdr.ctrl.newest", "Newest chunk (RTT sample)")
f.ack_delay = ProtoField.uint32("sdr.ctrl.ack_delay_us", "ACK delay (us)")
f.from = ProtoField.uint32("sdr.ctrl.from", "From incarnation", base.HEX)
f.to = ProtoField.uint32("sdr.ctrl.to", "To incarnation", base.HEX)
f.bitmap = ProtoField.bytes("sdr.ctrl.bitmap", "Chunk bitmap")
f.acked = ProtoField.string("sdr.ctrl.acked", "Chunks held")
f.holes = ProtoField.string("sdr.ctrl.holes", "Holes (missing behind a held chunk)")
f.nack_chunk = ProtoField.uint32("sdr.ctrl.nack_chunk", "Chunk to repeat")
f.nack_ranges = ProtoField.string("sdr.ctrl.nack_ranges", "Chunks to repeat")
-- both
f.link_drop = ProtoField.bool("sdr.link_drop", "Dropped by the link (pcapng drop flag: the EPB CRC-error bit)")
sdr.fields = f

local e = {
    retransmission = ProtoExpert.new("sdr.retransmission.expert", "Retransmission",
        expert.group.SEQUENCE, expert.severity.NOTE),
    ack_holes = ProtoExpert.new("sdr.ack_holes", "ACK with holes", expert.group.SEQUENCE, expert.severity.WARN),
    malformed = ProtoExpert.new("sdr.malformed", "Malformed SDR control message",
        expert.group.MALFORMED, expert.severity.ERROR),
    bad_prefs = ProtoExpert.new("sdr.bad_prefs", "SDR preferences invalid", expert.group.PROTOCOL,
        expert.severity.ERROR),
}
sdr.experts = { e.retransmission, e.ack_holes, e.malformed, e.bad_prefs }

-- What the InfiniBand dissector found (fields read back from the tree built so far).
local fx = {
    opcode = Field.new("infiniband.bth.opcode"),
    destqp = Field.new("infiniband.bth.destqp"),
    immdt = Field.new("infiniband.immdt"),
    rkey = Field.new("infiniband.reth.r_key"),
    dmalen = Field.new("infiniband.reth.dmalen"),
    ip_src = Field.new("ip.src"),
    ip_dst = Field.new("ip.dst"),
    crc_error = Field.new("frame.packet_flags_crc_error"),
}

-- SDR's pcapng tap records a frame the link dropped with the EPB's CRC-error bit set (pcapng has
-- no "dropped" bit) and the cause as the frame's comment: the sdr.link_drop field and " LINK DROP"
-- in the Info column; "" for a frame that arrived (and for every frame of a classic pcap).
local function link_drop(tree, range)
    local fi = fx.crc_error()
    if not fi or not fi.value then return "" end
    tree:add(f.link_drop, range, true)
    return " LINK DROP"
end

local OP_UC_WRITE_ONLY_IMM, OP_UD_SEND_ONLY, OP_UD_SEND_ONLY_IMM = 0x2B, 0x64, 0x65
local CTRL_QPN_BIT = 0x800000
local CTRL_HEADER = 48
local CTRL_MAX_PARAMS = 64  -- bytes of a version-2 parameter area (kCtrlMaxParams)
local SCHEME_EC_LT = scheme_id["ec-lt"]

---------------------------------------------------------------------------------------------
-- The immediate split, checked as fw_imm_layout_valid does; nil + reason if invalid.
local function layout()
    local p = sdr.prefs
    local mb, ob, fb = p.msg_bits, p.offset_bits, p.frag_bits
    if mb == 0 or ob == 0 or fb == 0 or mb + ob + fb ~= 32 then
        return nil, string.format("immediate split %d + %d + %d must add up to 32 with no field empty", mb, ob, fb)
    end
    if fb ~= 1 and fb ~= 2 and fb ~= 4 and fb ~= 8 and fb ~= 16 then
        return nil, string.format("fragment bits %d must be 1, 2, 4, 8 or 16", fb)
    end
    return { msg_bits = mb, offset_bits = ob, frag_bits = fb }
end

local function packets_per_chunk()
    local c, mtu = sdr.prefs.chunk_bytes, sdr.prefs.mtu_bytes
    if mtu == 0 or c < mtu then return nil end
    return math.floor((c + mtu - 1) / mtu)
end

-- "0-11,13,15-20" for the sorted chunk numbers in list.
local function ranges(list)
    local out, i = {}, 1
    while i <= #list do
        local j = i
        while j < #list and list[j + 1] == list[j] + 1 do j = j + 1 end
        out[#out + 1] = (j == i) and tostring(list[i]) or (list[i] .. "-" .. list[j])
        i = j + 1
    end
    return table.concat(out, ",")
end

-- The same for a list of {first, last} pairs.
local function pair_ranges(pairs_)
    local out = {}
    for _, r in ipairs(pairs_) do out[#out + 1] = (r[1] == r[2]) and tostring(r[1]) or (r[1] .. "-" .. r[2]) end
    return table.concat(out, ",")
end

---------------------------------------------------------------------------------------------
-- Retransmissions.
--
-- A data packet is a retransmission when its (sender, receiver, root key, message, packet
-- offset) was seen before in the same message, or when its offset is below the highest offset
-- this message has shown so far: the sender injects a message's packets in offset order, so a
-- lower offset is a repeat whose earlier copy was lost before the capture point (a pcap taken
-- after the link shows only what arrived). The root key separates a receiver's QPs and
-- generations; every transmission of a message uses the same one.
--
-- Message-id wrap: the id repeats every 2^msg_bits messages of a QP. Ids start in order, and
-- the C API lets a QP start message n + S only after message n completed (S slots, at most
-- 2^msg_bits): once 2^(msg_bits-1) other messages have started between the same two NICs
-- since a message started, that message is over and a packet with its id opens a new message.
-- The rule needs no control datagrams (a capture of plain SDR traffic has none) and holds for
-- S up to 2^(msg_bits-1) slots; with more, or with link reordering (a packet overtaken on the
-- link looks like a repeat), a flag can be wrong.
local state          -- per direction: { starts = n, msgs = { [key] = msg } }
local verdicts       -- per frame number: what the first pass decided (GUI re-dissects at random)

local function reset()
    state = {}
    verdicts = {}
end
reset()
sdr.init = reset  -- a new capture, or new preferences: dissect from scratch

local function classify(pinfo, dir_key, msg_key, offset, msg_bits)
    local dir = state[dir_key]
    if not dir then
        dir = { starts = 0, msgs = {} }
        state[dir_key] = dir
    end
    local m = dir.msgs[msg_key]
    if m and dir.starts - m.start >= 2 ^ (msg_bits - 1) then m = nil end  -- the id wrapped
    if not m then
        dir.starts = dir.starts + 1
        m = { start = dir.starts, first_frame = pinfo.number, seen = {}, hwm = -1, hwm_frame = 0 }
        dir.msgs[msg_key] = m
    end
    local v = { msg_first_frame = m.first_frame }
    local earlier = m.seen[offset]
    if earlier then
        v.of_frame = earlier
        v.why = "packet seen before in frame " .. earlier
    elseif offset < m.hwm then
        v.why = "below the message's highest offset " .. m.hwm .. " (frame " .. m.hwm_frame ..
            "): its first copy was lost before the capture point"
    end
    if not earlier then m.seen[offset] = pinfo.number end
    if offset > m.hwm then
        m.hwm = offset
        m.hwm_frame = pinfo.number
    end
    v.retransmission = v.why ~= nil
    return v
end

---------------------------------------------------------------------------------------------
-- Data packets (post-dissector).
local function dissect_data(tvb, pinfo, root)
    local imm_fi = fx.immdt()
    if not imm_fi or not imm_fi.range or imm_fi.range:len() < 4 then return end
    local range = imm_fi.range:range(0, 4)
    local tree = root:add(sdr, range, "SDR data packet")
    local l, why = layout()
    if not l then
        tree:add_proto_expert_info(e.bad_prefs, why)
        return
    end
    local imm = range:uint()
    local frag = bit32.band(imm, bit32.lshift(1, l.frag_bits) - 1)
    local offset = bit32.band(bit32.rshift(imm, l.frag_bits), bit32.lshift(1, l.offset_bits) - 1)
    local msg_id = bit32.rshift(imm, l.offset_bits + l.frag_bits)
    local nfrags = 32 / l.frag_bits
    local dmalen = fx.dmalen()
    local padding = dmalen ~= nil and dmalen.value == 0

    tree:add(f.msg_id, range, msg_id):append_text(string.format(" (immediate bits 31..%d)", l.offset_bits + l.frag_bits))
    tree:add(f.pkt_offset, range, offset)
    tree:add(f.imm_frag, range, frag)
    tree:add(f.imm_frag_index, range, offset % nfrags):append_text(string.format(" of %d", nfrags))
    local ppc = packets_per_chunk()
    local info = string.format(" [SDR msg=%d off=%d", msg_id, offset)
    if padding then
        tree:add(f.padding, range, true)
        info = info .. " padding"
    elseif ppc then
        local chunk = math.floor(offset / ppc)
        tree:add(f.chunk, range, chunk):append_text(string.format(" (%d packets per chunk)", ppc))
        info = info .. " chunk=" .. chunk
    else
        tree:add_proto_expert_info(e.bad_prefs, "chunk size must be at least the MTU")
    end

    local v = verdicts[pinfo.number]
    if not v and not pinfo.visited then
        local src, dst, rkey = fx.ip_src(), fx.ip_dst(), fx.rkey()
        local dir_key = (src and tostring(src.value) or "?") .. ">" .. (dst and tostring(dst.value) or "?")
        local msg_key = (rkey and rkey.value or 0) .. "/" .. msg_id
        -- padding packets reuse offsets 0..nfrags-1 as fragment indices: not data to track
        if not padding then v = classify(pinfo, dir_key, msg_key, offset, l.msg_bits) end
        verdicts[pinfo.number] = v or false
    end
    if v then
        tree:add(f.msg_first_frame, range, v.msg_first_frame)
        if v.retransmission then
            local item = tree:add(f.retransmission, range, true)
            if v.of_frame then tree:add(f.retrans_of, range, v.of_frame) end
            tree:add(f.retrans_why, range, v.why)
            item:add_proto_expert_info(e.retransmission, "Retransmission: " .. v.why)
            info = info .. " RETRANSMISSION"
        end
    end
    info = info .. link_drop(tree, range)
    pinfo.cols.protocol = "SDR"
    pinfo.cols.info:append(info .. "]")
end

function sdr.dissector(tvb, pinfo, root)
    local op = fx.opcode()
    if op and op.value == OP_UC_WRITE_ONLY_IMM then dissect_data(tvb, pinfo, root) end
end
register_postdissector(sdr)

---------------------------------------------------------------------------------------------
-- Control datagrams (heuristic on the InfiniBand payload).
-- `at`: where the bitmap starts (after the header and a version-2 parameter area).
local function bit_set(tvb, at, i)
    local byte = tvb(at + math.floor(i / 8), 1):uint()
    return bit32.band(byte, bit32.lshift(1, i % 8)) ~= 0
end

local function dissect_ctrl(tvb, pinfo, root)
    local len = tvb:len()
    local tree = root:add(sdr, tvb(), "SDR control message")
    pinfo.cols.protocol = "SDR"
    if len < CTRL_HEADER then
        tree:add_proto_expert_info(e.malformed,
            string.format("short control message: %d bytes, the header alone is %d", len, CTRL_HEADER))
        pinfo.cols.info = string.format("SDR control, malformed (%d bytes)", len)
        return
    end
    local version, ty, flags, scheme = tvb(0, 1):uint(), tvb(1, 1):uint(), tvb(2, 1):uint(), tvb(3, 1):uint()
    tree:add(f.version, tvb(0, 1))
    tree:add(f.type, tvb(1, 1))
    local fl = tree:add(f.flags, tvb(2, 1))
    fl:add(f.final, tvb(2, 1))
    fl:add(f.failed, tvb(2, 1))
    fl:add(f.repair, tvb(2, 1))
    fl:add(f.reply, tvb(2, 1))
    tree:add(f.scheme, tvb(3, 1))
    tree:add(f.k, tvb(4, 1))
    tree:add(f.m, tvb(5, 1))
    local P = 0
    if version == 2 then
        P = tvb(6, 2):le_uint()
        tree:add_le(f.params_len, tvb(6, 2))
    else
        tree:add_le(f.reserved, tvb(6, 2))
    end
    tree:add_le(f.seq, tvb(8, 8))
    tree:add_le(f.length, tvb(16, 8))
    tree:add_le(f.base, tvb(24, 4))
    tree:add_le(f.nbits, tvb(28, 4))
    tree:add_le(f.newest, tvb(32, 4))
    tree:add_le(f.ack_delay, tvb(36, 4))
    tree:add_le(f.from, tvb(40, 4))
    tree:add_le(f.to, tvb(44, 4))
    local seq, base, nbits = tvb(8, 8):le_uint64(), tvb(24, 4):le_uint(), tvb(28, 4):le_uint()
    local name = types[ty] or string.format("type %d", ty)
    local info = string.format("SDR %s seq=%s", name, tostring(seq))

    local bad = {}
    if version ~= 1 and version ~= 2 then bad[#bad + 1] = "unknown version " .. version .. " (this dissector reads 1 and 2)" end
    if version == 2 and (P == 0 or P > CTRL_MAX_PARAMS) then
        bad[#bad + 1] = string.format("version 2 with %d parameter bytes (1..%d)", P, CTRL_MAX_PARAMS)
    end
    if not types[ty] then bad[#bad + 1] = "unknown type " .. ty end
    if not schemes[scheme] then bad[#bad + 1] = "unknown scheme " .. scheme end
    local at = CTRL_HEADER + P  -- the bitmap
    local want = at + math.floor((nbits + 7) / 8)
    if len ~= want then
        if P > 0 then
            bad[#bad + 1] = string.format("%d bytes, but %d parameter bytes and %d bitmap bits make %d", len, P, nbits, want)
        else
            bad[#bad + 1] = string.format("%d bytes, but %d bitmap bits make %d", len, nbits, want)
        end
    end
    if #bad > 0 then
        tree:add_proto_expert_info(e.malformed, table.concat(bad, "; "))
        pinfo.cols.info = info .. " (malformed: " .. table.concat(bad, "; ") .. ")"
        return
    end
    tree:set_text(string.format("SDR control message: %s, seq %s", name, tostring(seq)))

    if ty == 1 then
        info = info .. string.format(" length=%s %s", tostring(tvb(16, 8):le_uint64()), schemes[scheme])
        -- k and m as the clear-to-send names them (0, 0 for a scheme without parameters)
        local k, m = tvb(4, 1):uint(), tvb(5, 1):uint()
        if k > 0 or m > 0 then info = info .. string.format(":%d,%d", k, m) end
    elseif ty == 4 then
        info = info .. string.format(" length=%s", tostring(tvb(16, 8):le_uint64()))
    end
    if P > 0 then
        local pt = tree:add(f.params, tvb(CTRL_HEADER, P))
        -- ec-lt: the degree distribution's c and delta, u16 each in thousandths, so both ends
        -- draw the same LT graph
        if scheme == SCHEME_EC_LT and P == 4 then
            pt:add_le(f.lt_c, tvb(CTRL_HEADER, 2))
            pt:add_le(f.lt_delta, tvb(CTRL_HEADER + 2, 2))
            info = info .. string.format(" c=%.3f delta=%.3f", tvb(CTRL_HEADER, 2):le_uint() / 1000,
                tvb(CTRL_HEADER + 2, 2):le_uint() / 1000)
        end
    end
    if nbits > 0 then tree:add(f.bitmap, tvb(at, len - at)) end

    if ty == 2 then
        -- ACK: every chunk below base is held; bit i says whether chunk base + i is.
        local held, last = {}, -1
        if base > 0 then held = { { 0, base - 1 } } end
        for i = 0, nbits - 1 do
            if bit_set(tvb, at, i) then
                last = base + i
                local r = held[#held]
                if r and r[2] == last - 1 then r[2] = last else held[#held + 1] = { last, last } end
            end
        end
        local acked = #held > 0 and pair_ranges(held) or "none"
        tree:add(f.acked, tvb(24, 4), acked)
        local holes = {}
        for c = base, last - 1 do
            if not bit_set(tvb, at, c - base) then holes[#holes + 1] = c end
        end
        info = info .. " held=" .. acked
        if bit32.band(flags, 1) ~= 0 then info = info .. " FINAL" end
        if bit32.band(flags, 2) ~= 0 then info = info .. " FAILED" end
        if #holes > 0 then
            local h = ranges(holes)
            tree:add(f.holes, tvb(at, len - at), h)
            tree:add_proto_expert_info(e.ack_holes, string.format("ACK with holes: chunks %s missing behind chunk %d", h, last))
            info = info .. " holes=" .. h
        end
    elseif ty == 3 then
        -- NACK: bit i set names chunk base + i for repetition.
        local named = {}
        for i = 0, nbits - 1 do
            if bit_set(tvb, at, i) then
                named[#named + 1] = base + i
                tree:add(f.nack_chunk, tvb(at + math.floor(i / 8), 1), base + i)
            end
        end
        local r = #named > 0 and ranges(named) or "none"
        tree:add(f.nack_ranges, tvb(at, len - at), r)
        info = info .. " repeat=" .. r
    end
    pinfo.cols.info = info .. link_drop(tree, tvb())
end

-- A UD SEND to a control QP is ours: dissect it whatever it holds (a malformed one is an
-- expert error, not someone else's payload).
local function heuristic(tvb, pinfo, root)
    local op, qp = fx.opcode(), fx.destqp()
    if not op or not qp then return false end
    if op.value ~= OP_UD_SEND_ONLY and op.value ~= OP_UD_SEND_ONLY_IMM then return false end
    if bit32.band(qp.value, CTRL_QPN_BIT) == 0 then return false end
    dissect_ctrl(tvb, pinfo, root)
    return true
end
sdr:register_heuristic("infiniband.payload", heuristic)
