// The host seam (sdr/host/device.hpp): backends chosen by name from one table, operations a
// backend does not provide failing with a message that names them, and sdr_qp_create giving
// back everything it took when the device runs out part-way (the ASan job checks for leaks).
#include <sdr/host/device.hpp>
#include <sdr/host/inspect.hpp>

#include <sdr.h>
#include <sdr_ext.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace sdr;

namespace {

// A backend that fills no operation at all.
class Unfilled final : public host::Device {
public:
    Unfilled() : Device("test", "test:0") {}
};

uint64_t live_transport_qps(sdr_context* ctx)
{
    uint64_t n = 0;
    host::nic_of(ctx)->for_each_qp([&](uint32_t, const emu::QpCounters&) { n++; });
    return n;
}

}  // namespace

// The verbs row opens through the table (its module, host/verbs) and refuses a device that is not
// there with a reason: the device list without it, no device list at all (no RDMA on this
// machine), or the module itself missing.
TEST(HostSeam, VerbsRowOpensThroughTheTableAndRefusesAnAbsentDevice)
{
    sdr_dev_attr da{8, 4};
    EXPECT_EQ(sdr_context_create("verbs:no_such_ibdev", &da), nullptr);
    const std::string e = sdr_last_error();
    EXPECT_EQ(e.rfind("sdr_context_create: device 'verbs:no_such_ibdev': ", 0), 0u) << e;
    EXPECT_TRUE(e.find("no RDMA device 'no_such_ibdev' (devices: ") != std::string::npos ||
                e.find("ibv_get_device_list: ") != std::string::npos ||
                e.find("cannot load the rdma-core backend") != std::string::npos)
        << e;
    EXPECT_EQ(sdr_context_create("ib:mlx5_0", &da), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("unknown device 'ib:mlx5_0'"), std::string::npos) << sdr_last_error();
}

TEST(HostSeam, UnfilledOperationsFailAndNameThemselvesAndTheBackend)
{
    Unfilled d;
    EXPECT_EQ(d.take_failure(), "");
    uint32_t qpn = 0;
    EXPECT_EQ(d.qp_create(1, 0, true, &qpn), host::Device::kInvalid);
    EXPECT_EQ(d.take_failure(), "the 'test' backend of test:0 does not provide qp_create");
    EXPECT_EQ(d.take_failure(), "");  // taken
    EXPECT_EQ(d.nic_alloc(64), nullptr);
    EXPECT_EQ(d.take_failure(), "the 'test' backend of test:0 does not provide nic_alloc");
    fw_send_wr wr{};
    EXPECT_FALSE(d.send_post(nullptr, nullptr, wr, 1, 0));
    EXPECT_EQ(d.take_failure(), "the 'test' backend of test:0 does not provide send_post");
    EXPECT_FALSE(d.rx_slot_arm(nullptr, 0, 0, 0, 0, nullptr, 0));
    EXPECT_EQ(d.take_failure(), "the 'test' backend of test:0 does not provide rx_slot_arm");
    EXPECT_EQ(d.ctrl_recv(0, nullptr, 0), -2);
    EXPECT_EQ(d.take_failure(), "the 'test' backend of test:0 does not provide ctrl_recv");
    // Not an emulator: no virtual time, no NIC to inspect.
    EXPECT_EQ(d.emu_controls(), nullptr);
}

// 16 channels x G = 8 is 128 transport QPs per SDR QP; the NIC has 8192. After 63 such QPs and
// one of G = 2, 96 are left: the next G = 8 QP fails after creating 96 transport QPs and 7 root
// keys, and must give them all back (and its NIC memory: ASan's leak check, LSan, sees that).
TEST(HostSeam, FailedQpCreateGivesBackWhatItTook)
{
    sdr_dev_attr da{16, 8};
    sdr_context* ctx = sdr_context_create("sim:0", &da);
    ASSERT_NE(ctx, nullptr) << sdr_last_error();
    sdr_qp_attr attr{12, 16, 2, SDR_MTU_4096, 1, 1, 0};  // 4 slots of 16 KiB, 4 KiB chunks
    sdr_qp_attr_ext g8{8, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC, 0}, g2{2, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC, 0};
    std::vector<sdr_qp*> qps;
    for (int i = 0; i < 63; i++) {
        qps.push_back(sdr_qp_create_ext(ctx, &attr, &g8));
        ASSERT_NE(qps.back(), nullptr) << i << ": " << sdr_last_error();
    }
    sdr_qp* small = sdr_qp_create_ext(ctx, &attr, &g2);
    ASSERT_NE(small, nullptr) << sdr_last_error();
    ASSERT_EQ(live_transport_qps(ctx), 63u * 128 + 32);

    EXPECT_EQ(sdr_qp_create_ext(ctx, &attr, &g8), nullptr);
    EXPECT_EQ(std::string(sdr_last_error()),
              "sdr_qp_create: the device has no transport QP, control QP or root key left for 8 generations x 16 channels");
    EXPECT_EQ(live_transport_qps(ctx), 63u * 128 + 32);  // the 96 it made are gone again

    // With the G = 2 QP gone, a G = 8 QP fits exactly: nothing of the failed one is held.
    ASSERT_EQ(sdr_qp_destroy(small), SDR_SUCCESS);
    sdr_qp* last = sdr_qp_create_ext(ctx, &attr, &g8);
    ASSERT_NE(last, nullptr) << sdr_last_error();
    EXPECT_EQ(live_transport_qps(ctx), 64u * 128);
    qps.push_back(last);

    // Send-only and receive-only QPs fail the same way (no root keys / no send state to free).
    sdr_qp_attr send_only = attr, recv_only = attr;
    send_only.recv_enable = 0;
    recv_only.send_enable = 0;
    EXPECT_EQ(sdr_qp_create_ext(ctx, &send_only, &g8), nullptr);
    EXPECT_EQ(sdr_qp_create_ext(ctx, &recv_only, &g8), nullptr);
    EXPECT_EQ(live_transport_qps(ctx), 64u * 128);

    for (sdr_qp* q : qps) EXPECT_EQ(sdr_qp_destroy(q), SDR_SUCCESS);
    EXPECT_EQ(live_transport_qps(ctx), 0u);
    EXPECT_EQ(sdr_context_destroy(ctx), SDR_SUCCESS);
}
