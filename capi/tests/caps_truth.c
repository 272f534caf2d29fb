/* What a device advertises works: each capability ibv_query_device(_ex) and mlx5dv_query_device
 * report is tried, and the values libibverbs and libmlx5 compute are what they compute. On the
 * shim, features not simulated are not advertised; on a card, advertised ones must work. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>

#include "common.h"

/* An RC QP created with these ibv_wr_* send ops, or NULL. */
static struct ibv_qp *qp_with_ops(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, uint64_t ops)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd, .send_ops_flags = ops,
	};
	return ibv_create_qp_ex(ctx, &a);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(pd && cq, "PD and CQ");

	struct ibv_device_attr_ex ex;
	memset(&ex, 0xa5, sizeof(ex));
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &ex), 0, "ibv_query_device_ex");
	struct ibv_device_attr *a = &ex.orig_attr;
	/* libibverbs: phys_port_cnt_ex is the sysfs port count, which is phys_port_cnt here. */
	CHECK_EQ(ex.phys_port_cnt_ex, a->phys_port_cnt, "phys_port_cnt_ex");
	/* mlx5_ib: every page size from 4 KiB up, as a 64-bit mask. */
	CHECK(a->page_size_cap & (1ULL << 12), "page_size_cap has 4 KiB: %#llx", (unsigned long long)a->page_size_cap);
	CHECK(a->page_size_cap >> 32, "page_size_cap is 64-bit: %#llx", (unsigned long long)a->page_size_cap);
	CHECK_EQ(a->page_size_cap & 0xfff, 0, "page_size_cap has no size below 4 KiB");

	/* Atomics: advertised, an RC QP takes the atomic send ops. */
	struct ibv_qp *q = qp_with_ops(ctx, pd, cq, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	if (a->atomic_cap != IBV_ATOMIC_NONE)
		CHECK(q, "atomic_cap %d advertised, but a QP with atomic send ops: %s", a->atomic_cap, strerror(errno));
	else
		CHECK(!q, "atomic_cap NONE, yet a QP takes atomic send ops");
	if (q)
		ibv_destroy_qp(q);

	/* Memory windows. */
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	if (a->device_cap_flags & IBV_DEVICE_MEM_WINDOW)
		CHECK(mw, "MEM_WINDOW advertised, but ibv_alloc_mw: %s", strerror(errno));
	else
		CHECK(!mw, "no MEM_WINDOW, yet ibv_alloc_mw succeeds");
	if (mw)
		ibv_dealloc_mw(mw);

	/* XRC domains. */
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1,
					 .oflags = O_CREAT };
	struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa);
	if (a->device_cap_flags & IBV_DEVICE_XRC)
		CHECK(xrcd, "XRC advertised, but ibv_open_xrcd: %s", strerror(errno));
	else
		CHECK(!xrcd, "no XRC, yet ibv_open_xrcd succeeds");
	if (xrcd)
		ibv_close_xrcd(xrcd);

	/* SRQs. */
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	if (a->max_srq > 0)
		CHECK(srq, "max_srq %d advertised, but ibv_create_srq: %s", a->max_srq, strerror(errno));
	else
		CHECK(!srq, "max_srq 0, yet ibv_create_srq succeeds");
	if (srq)
		ibv_destroy_srq(srq);

	/* Device memory. */
	struct ibv_alloc_dm_attr da = { .length = 64 };
	struct ibv_dm *dm = ibv_alloc_dm(ctx, &da);
	if (ex.max_dm_size >= 64)
		CHECK(dm, "max_dm_size %llu advertised, but ibv_alloc_dm: %s", (unsigned long long)ex.max_dm_size,
		      strerror(errno));
	else
		CHECK(!dm, "max_dm_size %llu, yet ibv_alloc_dm succeeds", (unsigned long long)ex.max_dm_size);
	if (dm)
		ibv_free_dm(dm);

	/* mlx5dv: the flags _mlx5dv_query_device computes. From rdma-core 58 on, a device with
	 * BlueFlame registers says so (MLX5DV_CONTEXT_FLAGS_BLUEFLAME, 1 << 8, which older headers
	 * lack); the simulated libmlx5 of the shipped profiles is release 64. */
	struct mlx5dv_context dv = { 0 };
	CHECK_EQ(mlx5dv_query_device(ctx, &dv), 0, "mlx5dv_query_device");
	CHECK(dv.flags & MLX5DV_CONTEXT_FLAGS_CQE_V1, "CQE_V1");
	if (dlsym(RTLD_DEFAULT, "mlx5sim_mlx5dv_query_device"))
		CHECK(dv.flags & (1 << 8), "BLUEFLAME: %#llx", (unsigned long long)dv.flags);

	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("PASS\n");
	return 0;
}
