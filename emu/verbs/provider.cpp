// The provider's face to libibverbs: registration, device matching and allocation, context
// open and close, and the ops table. libibverbs finds a device in the sysfs tree sdr-rdma writes
// ($SYSFS_PATH), opens its node /dev/infiniband/uverbsN (the null device: there is no kernel
// side) and calls alloc_context here.
#include "engine.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace sdr::verbs {

Context* to_context(ibv_context* c)
{
    auto* vctx = reinterpret_cast<verbs_context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(vctx) - offsetof(Context, vctx));
}

Device* to_device(ibv_device* d)
{
    return reinterpret_cast<Device*>(reinterpret_cast<char*>(d) - offsetof(Device, vdev) - offsetof(verbs_device, device));
}

// Started on first use, not at open: ibv_devinfo and other queries open the device without
// needing the port (which takes root, and the interface in this namespace).
Engine* context_engine(ibv_context* c)
{
    ContextState* st = to_context(c)->state;
    std::lock_guard lock(st->mu);
    if (!st->engine) st->engine = Engine::acquire(st->port);
    return st->engine;
}

namespace {

void free_context(ibv_context* c)
{
    Context* ctx = to_context(c);
    if (ctx->state) {
        for (const ChannelPipe& p : ctx->state->channels) close(p.write_fd);
        if (ctx->state->async_write_fd >= 0) close(ctx->state->async_write_fd);
        if (ctx->state->engine) Engine::release(ctx->state->engine);
        delete ctx->state;
    }
    verbs_uninit_context(&ctx->vctx);  // closes cmd_fd and async_fd
    std::free(ctx);
}

constexpr verbs_context_ops kOps = [] {
    verbs_context_ops o{};
    o.alloc_pd = alloc_pd;
    o.async_event = async_event;
    o.attach_mcast = attach_mcast;
    o.cq_event = cq_event;
    o.create_ah = create_ah;
    o.create_cq = create_cq;
    o.create_cq_ex = create_cq_ex;
    o.create_qp = create_qp;
    o.create_qp_ex = create_qp_ex;
    o.create_srq = create_srq;
    o.dealloc_pd = dealloc_pd;
    o.dereg_mr = dereg_mr;
    o.destroy_ah = destroy_ah;
    o.destroy_cq = destroy_cq;
    o.destroy_qp = destroy_qp;
    o.destroy_srq = destroy_srq;
    o.detach_mcast = detach_mcast;
    o.free_context = free_context;
    o.modify_qp = modify_qp;
    o.modify_srq = modify_srq;
    o.poll_cq = poll_cq;
    o.post_recv = post_recv;
    o.post_send = post_send;
    o.post_srq_recv = post_srq_recv;
    o.query_device_ex = query_device_ex;
    o.query_port = query_port;
    o.query_qp = query_qp;
    o.query_srq = query_srq;
    o.reg_mr = reg_mr;
    o.req_notify_cq = req_notify_cq;
    o.rereg_mr = rereg_mr;
    o.resize_cq = resize_cq;
    return o;  // every other op stays libibverbs' dummy: EOPNOTSUPP
}();

verbs_context* alloc_context(ibv_device* ibdev, int cmd_fd, void* /*private_data*/)
{
    // Takes cmd_fd (closes it on failure); calloc'd wrapper with the verbs_context inside.
    auto* ctx = static_cast<Context*>(_verbs_init_and_alloc_context(
        ibdev, cmd_fd, sizeof(Context), reinterpret_cast<verbs_context*>(offsetof(Context, vctx)), 0));
    if (!ctx) return nullptr;
    int err = 0;
    ctx->state = new (std::nothrow) ContextState;
    if (!ctx->state) {
        err = ENOMEM;
    } else if (!read_port_info(ibdev->ibdev_path, &ctx->state->port)) {
        err = errno;
    } else {
        // libibverbs would ask the kernel for the async event fd; with no kernel the provider
        // owns it: a pipe the model's asynchronous events are written into (async.cpp).
        err = open_async_pipe(ctx->state, &ctx->vctx.context.async_fd);
    }
    if (err) {
        free_context(&ctx->vctx.context);
        errno = err;
        return nullptr;
    }
    // One completion vector per online CPU, as rxe reports (UCX and MPI spread CQs over them);
    // a CQ's vector changes nothing here: the NIC's one thread raises every event.
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    ctx->vctx.context.num_comp_vectors = cpus > 0 ? static_cast<int>(cpus) : 1;
    verbs_set_ops(&ctx->vctx, &kOps);
    return &ctx->vctx;
}

verbs_device* alloc_device(verbs_sysfs_dev* /*sysfs_dev*/)
{
    auto* dev = static_cast<Device*>(std::calloc(1, sizeof(Device)));
    return dev ? &dev->vdev : nullptr;
}

void uninit_device(verbs_device* vdev)
{
    std::free(to_device(&vdev->device));
}

// Without netlink RDMA libibverbs knows no driver id, so the device matches by name: the
// library's modalias for a device with no modalias file is "rdma_device:N<ibdev>".
const verbs_match_ent kMatch[] = {
    {nullptr, {"rdma_device:*Nsdr*"}, 0, 0, SDR_VERBS_MATCH_MODALIAS},
    {nullptr, {nullptr}, 0, 0, SDR_VERBS_MATCH_SENTINEL},
};

// sdr-rdma writes abi_version 1 into uverbsN; nothing else reads it.
const verbs_device_ops kDeviceOps = {
    .name = "sdr",
    .match_min_abi_version = 1,
    .match_max_abi_version = 1,
    .match_table = kMatch,
    .static_providers = nullptr,
    .match_device = nullptr,
    .alloc_context = alloc_context,
    .import_context = nullptr,
    .alloc_device = alloc_device,
    .uninit_device = uninit_device,
};

__attribute__((constructor)) void register_driver()
{
    verbs_register_driver_34(&kDeviceOps);
}

}  // namespace

bool is_provider_device(const ibv_device* d)
{
    return d && reinterpret_cast<const verbs_device*>(d)->ops == &kDeviceOps;
}
}  // namespace sdr::verbs
