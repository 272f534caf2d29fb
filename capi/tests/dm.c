/* Device memory (MEMIC) as libmlx5 gives it: ibv_query_device_ex's max_dm_size, ibv_alloc_dm's
 * limits, ibv_memcpy_to_dm / ibv_memcpy_from_dm's EFAULT and EINVAL, mlx5dv_init_obj's DM
 * mapping, ibv_reg_dm_mr's checks, an RDMA WRITE and READ through a DM MR on a loopback pair,
 * and ibv_free_dm while an MR uses the DM. */
#include "common.h"

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_device_attr_ex dx;
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &dx), 0, "ibv_query_device_ex");
	if (dx.max_dm_size == 0)
		SKIP("the device has no device memory (max_dm_size 0)");
	size_t max = dx.max_dm_size;
	printf("max_dm_size %zu\n", max);

	/* Past max_dm_size, a comp_mask, an alignment past the device's: EINVAL. */
	struct ibv_alloc_dm_attr a = { .length = max + 1 };
	errno = 0;
	CHECK(!ibv_alloc_dm(ctx, &a) && errno == EINVAL, "alloc past max_dm_size: errno %d", errno);
	a = (struct ibv_alloc_dm_attr){ .length = 64, .comp_mask = 1 };
	errno = 0;
	CHECK(!ibv_alloc_dm(ctx, &a) && errno == EINVAL, "alloc with a comp_mask: errno %d", errno);
	a = (struct ibv_alloc_dm_attr){ .length = 64, .log_align_req = 63 };
	errno = 0;
	CHECK(!ibv_alloc_dm(ctx, &a) && errno == EINVAL, "alloc aligned to 2^63: errno %d", errno);
	struct mlx5dv_alloc_dm_attr dva = { .type = 77 };
	a = (struct ibv_alloc_dm_attr){ .length = 64 };
	errno = 0;
	CHECK(!mlx5dv_alloc_dm(ctx, &a, &dva) && errno == EOPNOTSUPP, "mlx5dv_alloc_dm of type 77: errno %d", errno);

	/* All of MEMIC once; then nothing is left. */
	a = (struct ibv_alloc_dm_attr){ .length = max };
	struct ibv_dm *all = ibv_alloc_dm(ctx, &a);
	CHECK(all, "alloc of max_dm_size: errno %d", errno);
	a.length = 4;
	errno = 0;
	CHECK(!ibv_alloc_dm(ctx, &a) && errno == ENOMEM, "alloc with MEMIC full: errno %d", errno);
	CHECK_EQ(ibv_free_dm(all), 0, "ibv_free_dm");

	dva = (struct mlx5dv_alloc_dm_attr){ .type = MLX5DV_DM_TYPE_MEMIC };
	a = (struct ibv_alloc_dm_attr){ .length = 256 };
	struct ibv_dm *dm = mlx5dv_alloc_dm(ctx, &a, &dva);
	CHECK(dm, "mlx5dv_alloc_dm: errno %d", errno);
	CHECK(dm->comp_mask & IBV_DM_MASK_HANDLE, "ibv_dm.comp_mask has the handle");

	/* Copies: EFAULT past the end first, then EINVAL unaligned. */
	uint32_t words[16], back[16];
	for (int i = 0; i < 16; i++)
		words[i] = 0x01020304u * (i + 1);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 64, words, sizeof(words)), 0, "ibv_memcpy_to_dm");
	CHECK_EQ(ibv_memcpy_from_dm(back, dm, 64, sizeof(back)), 0, "ibv_memcpy_from_dm");
	CHECK(!memcmp(words, back, sizeof(words)), "the bytes read back");
	CHECK_EQ(ibv_memcpy_to_dm(dm, 200, words, 64), EFAULT, "copy past the end");
	CHECK_EQ(ibv_memcpy_to_dm(dm, 255, words, 3), EFAULT, "unaligned copy past the end");
	CHECK_EQ(ibv_memcpy_to_dm(dm, 2, words, 8), EINVAL, "copy at offset 2");
	CHECK_EQ(ibv_memcpy_from_dm(back, dm, 0, 6), EINVAL, "copy of 6 bytes");

	/* mlx5dv_init_obj: the mapping holds what was copied in. */
	struct mlx5dv_dm ddm = { 0 };
	struct mlx5dv_obj obj = { .dm = { .in = dm, .out = &ddm } };
	CHECK_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_DM), 0, "mlx5dv_init_obj(DM)");
	CHECK(ddm.buf && ddm.length == 256, "dv dm: buf %p length %llu", ddm.buf, (unsigned long long)ddm.length);
	CHECK(!memcmp((char *)ddm.buf + 64, words, sizeof(words)), "the mapping's bytes");

	/* ibv_reg_dm_mr: ZERO_BASED required, other refusals EINVAL; addr NULL. */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	unsigned rw = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	errno = 0;
	CHECK(!ibv_reg_dm_mr(pd, dm, 0, 64, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, "no ZERO_BASED: %d", errno);
	errno = 0;
	CHECK(!ibv_reg_dm_mr(pd, dm, 0, 64, rw | IBV_ACCESS_MW_BIND) && errno == EINVAL, "MW_BIND: %d", errno);
	errno = 0;
	CHECK(!ibv_reg_dm_mr(pd, dm, 200, 64, rw) && errno == EINVAL, "past the DM: %d", errno);
	struct ibv_mr *dmr = ibv_reg_dm_mr(pd, dm, 64, 128, rw);
	CHECK(dmr, "ibv_reg_dm_mr: errno %d", errno);
	CHECK(dmr->addr == NULL && dmr->length == 128, "DM MR addr %p length %zu", dmr->addr, dmr->length);
	CHECK_EQ(ibv_free_dm(dm), EBUSY, "ibv_free_dm under an MR");

	/* WRITE 32 bytes to the DM MR's address 16 (DM bytes 80..112), READ them back. */
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq, "ibv_create_cq");
	struct ibv_qp *qa = rc_qp(ctx, pd, cq, 0), *qb = rc_qp(ctx, pd, cq, 0);
	CHECK(qa && qb, "rc_qp");
	connect_qp(ctx, qa, qb);
	connect_qp(ctx, qb, qa);
	static uint8_t host[256];
	for (int i = 0; i < 256; i++)
		host[i] = (uint8_t)(i * 7 + 1);
	struct ibv_mr *hmr = ibv_reg_mr(pd, host, sizeof(host), IBV_ACCESS_LOCAL_WRITE);
	CHECK(hmr, "ibv_reg_mr");
	struct ibv_sge sge = { .addr = (uintptr_t)host, .length = 32, .lkey = hmr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = 16, .rkey = dmr->rkey } }, *bad;
	CHECK_EQ(ibv_post_send(qa, &wr, &bad), 0, "post WRITE");
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1, "WRITE completion: status %d", wc.status);
	uint8_t got[32];
	CHECK_EQ(ibv_memcpy_from_dm(got, dm, 80, 32), 0, "ibv_memcpy_from_dm after the WRITE");
	CHECK(!memcmp(got, host, 32), "the DM holds what was written");
	sge.addr = (uintptr_t)(host + 128);
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_READ;
	CHECK_EQ(ibv_post_send(qa, &wr, &bad), 0, "post READ");
	wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2, "READ completion: status %d", wc.status);
	CHECK(!memcmp(host + 128, host, 32), "the READ brought the DM's bytes");

	CHECK_EQ(ibv_destroy_qp(qa), 0, "destroy qa");
	CHECK_EQ(ibv_destroy_qp(qb), 0, "destroy qb");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "destroy cq");
	CHECK_EQ(ibv_dereg_mr(hmr), 0, "dereg host MR");
	CHECK_EQ(ibv_dereg_mr(dmr), 0, "dereg DM MR");
	CHECK_EQ(ibv_free_dm(dm), 0, "ibv_free_dm");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	printf("PASS\n");
	return 0;
}
