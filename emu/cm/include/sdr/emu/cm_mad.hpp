// CM MADs (IBTA vol. 1 chapter 12, 12.6): the 256-byte Management Datagrams of the
// Communication Manager class, decoded into one struct per message and encoded back, and the
// RDMA IP CM service's header that rdma_cm puts first in a REQ's or SIDR_REQ's private data
// (vol. 1 Annex A11). Pure: no engine, no state, so a fuzzer drives it (tests/fuzz).
//
// Field offsets are the IBTA's message tables counted from the start of the message (after the
// 24-byte common MAD header); bit fields are big-endian, the first field of a byte in its most
// significant bits. decode reads exactly 256 bytes and keeps every field the tables define, so
// encode(decode(m)) equals m except for reserved bits (zero), and a second round is stable.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <variant>

namespace sdr::emu::cm {

inline constexpr size_t kMadBytes = 256;
inline constexpr size_t kMadHeaderBytes = 24;
inline constexpr uint8_t kMadBaseVersion = 1;
inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint8_t kMethodSend = 0x03;

// Attribute IDs of the CM class (IBTA vol. 1 12.6).
enum class Attr : uint16_t {
    ClassPortInfo = 0x0001, Req = 0x0010, Mra = 0x0011, Rej = 0x0012, Rep = 0x0013, Rtu = 0x0014,
    Dreq = 0x0015, Drep = 0x0016, SidrReq = 0x0017, SidrRep = 0x0018, Lap = 0x0019, Apr = 0x001A,
};

// The common MAD header (IBTA vol. 1 13.4).
struct MadHeader {
    uint8_t base_version = kMadBaseVersion, mgmt_class = kMgmtClassCm, class_version = kCmClassVersion;
    uint8_t method = kMethodSend;  // bit 7: the response bit
    uint16_t status = 0, class_specific = 0;
    uint64_t tid = 0;
    uint16_t attr_id = 0;
    uint32_t attr_mod = 0;
    bool operator==(const MadHeader&) const = default;
};

// Transport Service Type of a REQ (2 bits).
enum class TransportType : uint8_t { Rc = 0, Uc = 1, Rd = 2, Extended = 3 };

// The Primary or Alternate path of a REQ (IBTA vol. 1 12.6.5, bytes 52-95 and 96-139).
struct PathInfo {
    uint16_t local_lid = 0, remote_lid = 0;
    std::array<uint8_t, 16> local_gid{}, remote_gid{};
    uint32_t flow_label = 0;  // 20 bits
    uint8_t packet_rate = 0;  // 6 bits
    uint8_t traffic_class = 0, hop_limit = 0;
    uint8_t sl = 0;  // 4 bits
    bool subnet_local = false;
    uint8_t local_ack_timeout = 0;  // 5 bits
    bool operator==(const PathInfo&) const = default;
};

struct ReqMsg {  // Table: REQ Message Contents (12.6.5)
    uint32_t local_comm_id = 0;
    uint32_t vendor_id = 0;  // 24 bits
    uint64_t service_id = 0;
    uint64_t local_ca_guid = 0;
    uint32_t local_qkey = 0;
    uint32_t local_qpn = 0;  // 24 bits
    uint8_t responder_resources = 0;
    uint32_t local_eecn = 0;  // 24 bits
    uint8_t initiator_depth = 0;
    uint32_t remote_eecn = 0;                  // 24 bits
    uint8_t remote_cm_response_timeout = 0;    // 5 bits
    TransportType transport = TransportType::Rc;
    bool flow_control = false;
    uint32_t starting_psn = 0;               // 24 bits
    uint8_t local_cm_response_timeout = 0;   // 5 bits
    uint8_t retry_count = 0;                 // 3 bits
    uint16_t pkey = 0;
    uint8_t path_mtu = 0;  // 4 bits: 1 = 256 .. 5 = 4096
    bool rdc_exists = false;
    uint8_t rnr_retry_count = 0;  // 3 bits
    uint8_t max_cm_retries = 0;   // 4 bits
    bool srq = false;
    uint8_t extended_transport = 0;  // 3 bits
    PathInfo primary, alternate;
    bool sap_supported = false;
    std::array<uint8_t, 92> private_data{};
    bool operator==(const ReqMsg&) const = default;
};

struct MraMsg {  // 12.6.6
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    uint8_t message_mraed = 0;  // 2 bits: 0 REQ, 1 REP, 2 LAP
    uint8_t service_timeout = 0;  // 5 bits
    std::array<uint8_t, 222> private_data{};
    bool operator==(const MraMsg&) const = default;
};

struct RejMsg {  // 12.6.7
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    uint8_t message_rejected = 0;  // 2 bits: 0 REQ, 1 REP, 2 other
    uint8_t rejected_info_length = 0;  // 7 bits
    uint16_t reason = 0;
    std::array<uint8_t, 72> ari{};
    std::array<uint8_t, 148> private_data{};
    bool operator==(const RejMsg&) const = default;
};

struct RepMsg {  // 12.6.8
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    uint32_t local_qkey = 0;
    uint32_t local_qpn = 0;   // 24 bits
    uint32_t local_eecn = 0;  // 24 bits
    uint32_t starting_psn = 0;  // 24 bits
    uint8_t responder_resources = 0, initiator_depth = 0;
    uint8_t target_ack_delay = 0;   // 5 bits
    uint8_t failover_accepted = 0;  // 2 bits
    bool flow_control = false;
    uint8_t rnr_retry_count = 0;  // 3 bits
    bool srq = false;
    uint64_t local_ca_guid = 0;
    std::array<uint8_t, 196> private_data{};
    bool operator==(const RepMsg&) const = default;
};

struct RtuMsg {  // 12.6.9
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    std::array<uint8_t, 224> private_data{};
    bool operator==(const RtuMsg&) const = default;
};

struct DreqMsg {  // 12.6.10
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    uint32_t remote_qpn = 0;  // 24 bits: the receiver's QPN (or EECN)
    std::array<uint8_t, 220> private_data{};
    bool operator==(const DreqMsg&) const = default;
};

struct DrepMsg {  // 12.6.11
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    std::array<uint8_t, 224> private_data{};
    bool operator==(const DrepMsg&) const = default;
};

struct SidrReqMsg {  // 12.11.1
    uint32_t request_id = 0;
    uint16_t pkey = 0;
    uint64_t service_id = 0;
    std::array<uint8_t, 216> private_data{};
    bool operator==(const SidrReqMsg&) const = default;
};

struct SidrRepMsg {  // 12.11.2
    uint32_t request_id = 0;
    uint8_t status = 0;
    uint8_t additional_info_length = 0;
    uint32_t qpn = 0;  // 24 bits
    uint64_t service_id = 0;
    uint32_t qkey = 0;
    std::array<uint8_t, 72> additional_info{};
    std::array<uint8_t, 136> private_data{};
    bool operator==(const SidrRepMsg&) const = default;
};

using CmMessage = std::variant<ReqMsg, MraMsg, RejMsg, RepMsg, RtuMsg, DreqMsg, DrepMsg, SidrReqMsg, SidrRepMsg>;

struct CmMad {
    MadHeader hdr;
    CmMessage msg;
    bool operator==(const CmMad&) const = default;
};

// Why a datagram is not a CM MAD this agent takes, in the order decode checks.
enum class MadVerdict : uint8_t { Ok, Short, BadBaseVersion, BadClass, BadClassVersion, BadMethod, UnknownAttr };

// Decode len bytes (a MAD is exactly 256; more, such as a sender's pad, is ignored). On Ok,
// *out holds the header and the message its attribute ID names.
[[nodiscard]] MadVerdict decode_mad(const uint8_t* p, size_t len, CmMad* out);
// The 256 bytes of m; hdr.attr_id is set from the message's type.
void encode_mad(const CmMad& m, uint8_t* out);
// The attribute ID of a message type.
Attr attr_of(const CmMessage& msg);

// Path MTU codes (IBTA vol. 1, the MTU encoding): 1 = 256 .. 5 = 4096; 0 for any other size.
uint8_t mtu_code(uint32_t bytes);
uint32_t mtu_bytes(uint8_t code);  // 0 for a code outside 1..5

// The RDMA IP CM service's header (Annex A11): the first 36 bytes of a REQ's or SIDR_REQ's
// private data. Addresses are 16 bytes; an IPv4 address is the last 4 of 12 zero bytes.
struct IpCmHeader {
    uint8_t version = 0;     // major and minor nibbles: 0.0
    uint8_t ip_version = 4;  // 4 or 6 (the high nibble of byte 1)
    uint16_t src_port = 0;
    std::array<uint8_t, 16> src_ip{}, dst_ip{};
    bool operator==(const IpCmHeader&) const = default;
};
inline constexpr size_t kIpCmHeaderSize = 36;
void encode_ip_cm_header(const IpCmHeader& h, uint8_t* out);
IpCmHeader decode_ip_cm_header(const uint8_t* p);
// IPv4 (host order) into and out of a header's 16-byte address; false: not an IPv4 address.
std::array<uint8_t, 16> ip_cm_addr_v4(uint32_t ip);
[[nodiscard]] bool ip_cm_addr_to_v4(const std::array<uint8_t, 16>& a, uint32_t* ip);

}  // namespace sdr::emu::cm
