/* Every op of ibv_qp_ex and mlx5dv_qp_ex that a header's inline function calls is set, on
 * every QP: an op the simulator does not model (TSO, atomic write, flush, the XRC/DC address
 * setters and the UD one off a UD QP; raw WQEs and memcpy on a QP created without their ops) fails its chain with EOPNOTSUPP at
 * ibv_wr_complete, posts nothing, and leaves the QP usable (and so does a memory window bind
 * of a NULL window, with EINVAL: mw.c binds real ones); a QP created without send ops
 * flags has no ibv_qp_ex (NULL, as libibverbs gives) but its ops are set all the same.
 * On the real libraries these ops build WQEs (or are NULL for the QP type), so the
 * simulator-only checks run on the shim alone. The atomics are modelled: their chain posts. */
#include <dlfcn.h>
#include "common.h"

static struct ibv_cq *cq;
static struct ibv_qp_ex *qx;
static struct mlx5dv_qp_ex *dvx;
static uint8_t buf[64];
static struct ibv_mr *mr;

/* rdma-core releases after 44 add wr_flush right after wr_atomic_write. */
typedef void (*wr_flush_fn)(struct ibv_qp_ex *, uint32_t, uint64_t, size_t, uint8_t, uint8_t);

static wr_flush_fn flush_op(struct ibv_qp_ex *q)
{
	return *(wr_flush_fn *)((char *)q + sizeof(struct ibv_qp_ex));
}

/* A chain of one op fails with EOPNOTSUPP (a bind of no window: EINVAL) and posts nothing;
 * then a WRITE still completes. */
static void refused(int op, const char *what)
{
	uint64_t remote = (uintptr_t)buf;
	ibv_wr_start(qx);
	qx->wr_id = 100 + op;
	qx->wr_flags = IBV_SEND_SIGNALED;
	switch (op) {
	case 2: {
		struct ibv_mw_bind_info info = { .mr = mr, .addr = remote, .length = 8 };
		ibv_wr_bind_mw(qx, NULL, 0x1234, &info);
		break;
	}
	case 3: ibv_wr_send_tso(qx, buf, 14, 1000); ibv_wr_set_sge(qx, mr->lkey, remote, 8); break;
	case 4: ibv_wr_atomic_write(qx, mr->rkey, remote, buf); break;
	case 5: flush_op(qx)(qx, mr->rkey, remote, 8, 1, 1); break;
	case 6: ibv_wr_send(qx); ibv_wr_set_ud_addr(qx, NULL, 1, 2); ibv_wr_set_sge(qx, mr->lkey, remote, 8); break;
	case 7: ibv_wr_send(qx); ibv_wr_set_xrc_srqn(qx, 3); ibv_wr_set_sge(qx, mr->lkey, remote, 8); break;
	case 8: ibv_wr_send(qx); mlx5dv_wr_set_dc_addr(dvx, NULL, 5, 6); ibv_wr_set_sge(qx, mr->lkey, remote, 8); break;
	case 9:
		ibv_wr_send(qx);
		mlx5dv_wr_set_dc_addr_stream(dvx, NULL, 5, 6, 7);
		ibv_wr_set_sge(qx, mr->lkey, remote, 8);
		break;
	case 10: mlx5dv_wr_raw_wqe(dvx, buf); break;
	case 11: mlx5dv_wr_memcpy(dvx, mr->lkey, remote, mr->lkey, remote + 32, 16); break;
	}
	CHECK_EQ(ibv_wr_complete(qx), op == 2 ? EINVAL : EOPNOTSUPP, what);
	struct ibv_wc wc;
	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0, "a refused chain completes nothing");
	ibv_wr_start(qx);
	qx->wr_id = 7;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, mr->rkey, remote + 32);
	ibv_wr_set_sge(qx, mr->lkey, remote, 16);
	CHECK_EQ(ibv_wr_complete(qx), 0, "a WRITE after a refused chain");
	wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, "%s: the next WRITE: status %d wr_id %llu", what,
	      wc.status, (unsigned long long)wc.wr_id);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq, "ibv_alloc_pd / ibv_create_cq");
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));

	/* Without send ops flags: no ibv_qp_ex, on both libraries. */
	struct ibv_qp_init_attr plain_attr = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
							.max_recv_sge = 1 } };
	struct ibv_qp *plain = ibv_create_qp(pd, &plain_attr);
	CHECK(plain, "ibv_create_qp: %s", strerror(errno));
	CHECK(ibv_qp_to_qp_ex(plain) == NULL, "ibv_qp_to_qp_ex of a QP without send ops flags");

	if (!dlsym(RTLD_DEFAULT, "mlx5sim_mlx5dv_create_qp")) {
		printf("the simulator-only checks skipped: not on the shim\n");
		return 0;
	}
	/* ... but every op is there, so a program that casts never jumps to NULL. */
	struct ibv_qp_ex *px = (struct ibv_qp_ex *)plain;
	void *ops[] = { px->wr_start, px->wr_complete, px->wr_abort, px->wr_atomic_cmp_swp, px->wr_atomic_fetch_add,
			px->wr_bind_mw, px->wr_local_inv, px->wr_rdma_read, px->wr_rdma_write, px->wr_rdma_write_imm,
			px->wr_send, px->wr_send_imm, px->wr_send_inv, px->wr_send_tso, px->wr_set_ud_addr,
			px->wr_set_xrc_srqn, px->wr_set_inline_data, px->wr_set_inline_data_list, px->wr_set_sge,
			px->wr_set_sge_list, px->wr_atomic_write, (void *)flush_op(px) };
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		CHECK(ops[i], "op %zu of a QP without send ops flags is NULL", i);
	struct mlx5dv_qp_ex *pdv = mlx5dv_qp_ex_from_ibv_qp_ex(px);
	CHECK(pdv, "mlx5dv_qp_ex_from_ibv_qp_ex");
	void *dv_ops[] = { pdv->wr_set_dc_addr, pdv->wr_mr_interleaved, pdv->wr_mr_list, pdv->wr_mkey_configure,
			   pdv->wr_set_mkey_access_flags, pdv->wr_set_mkey_layout_list,
			   pdv->wr_set_mkey_layout_interleaved, pdv->wr_set_mkey_sig_block, pdv->wr_raw_wqe,
			   pdv->wr_set_dc_addr_stream, pdv->wr_memcpy, pdv->wr_set_mkey_crypto };
	for (size_t i = 0; i < sizeof(dv_ops) / sizeof(dv_ops[0]); i++)
		CHECK(dv_ops[i], "mlx5dv op %zu is NULL", i);

	struct ibv_qp *q = rc_qp(ctx, pd, cq, MLX5DV_QP_EX_WITH_MKEY_CONFIGURE);
	CHECK(q, "mlx5dv_create_qp: %s", strerror(errno));
	connect_qp(ctx, q, q);
	qx = ibv_qp_to_qp_ex(q);
	dvx = mlx5dv_qp_ex_from_ibv_qp_ex(qx);
	CHECK(qx && dvx, "the QP's ibv_qp_ex and mlx5dv_qp_ex");
	static const char *names[] = { "atomic_cmp_swp", "atomic_fetch_add", "bind_mw", "send_tso", "atomic_write",
				       "flush", "set_ud_addr", "set_xrc_srqn", "set_dc_addr", "set_dc_addr_stream",
				       "raw_wqe", "memcpy" };
	for (int op = 2; op < 12; op++)
		refused(op, names[op]);
	/* An abandoned chain leaves nothing behind. */
	ibv_wr_start(qx);
	ibv_wr_atomic_fetch_add(qx, mr->rkey, (uintptr_t)buf, 1);
	ibv_wr_abort(qx);
	ibv_wr_start(qx);
	CHECK_EQ(ibv_wr_complete(qx), 0, "an empty chain after an abort");

	/* The atomics build their WQE and post; this QP grants no REMOTE_ATOMIC, so the
	 * responder (the QP itself) refuses with a remote access error. */
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_cmp_swp(qx, mr->rkey, (uintptr_t)buf, 1, 2);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf + 8, 8);
	CHECK_EQ(ibv_wr_complete(qx), 0, "an atomic_cmp_swp chain");
	struct ibv_wc awc = poll_one(cq);
	CHECK(awc.wr_id == 1 && awc.status == IBV_WC_REM_ACCESS_ERR, "the atomic without REMOTE_ATOMIC: wr_id %llu status %d",
	      (unsigned long long)awc.wr_id, awc.status);
	/* A UD QP's ops are set too; posting on it is not simulated. */
	struct ibv_qp_init_attr_ex ud = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
					  .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
						   .max_recv_sge = 1 },
					  .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					  .pd = pd, .send_ops_flags = IBV_QP_EX_WITH_SEND };
	struct ibv_qp *u = ibv_create_qp_ex(ctx, &ud);
	if (u) {
		struct ibv_qp_ex *ux = ibv_qp_to_qp_ex(u);
		CHECK(ux, "ibv_qp_to_qp_ex of a UD QP");
		ibv_wr_start(ux);
		ibv_wr_send(ux);
		ibv_wr_set_ud_addr(ux, NULL, 1, 0x11111111);
		ibv_wr_set_sge(ux, mr->lkey, (uintptr_t)buf, 8);
		/* Never moved to RTS: EINVAL, as mlx5_send_wr_complete_error gives. */
		CHECK_EQ(ibv_wr_complete(ux), EINVAL, "a UD send on a QP in RESET");
		CHECK_EQ(ibv_destroy_qp(u), 0, "ibv_destroy_qp (UD)");
	}
	/* mlx5_send_wr_complete_error: in RESET, EINVAL comes before any latched error. */
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	CHECK_EQ(ibv_modify_qp(q, &reset, IBV_QP_STATE), 0, "modify to RESET");
	ibv_wr_start(qx);
	ibv_wr_atomic_fetch_add(qx, mr->rkey, (uintptr_t)buf, 1);
	CHECK_EQ(ibv_wr_complete(qx), EINVAL, "an atomic on a QP in RESET");
	CHECK_EQ(ibv_destroy_qp(q), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(plain), 0, "ibv_destroy_qp (plain)");
	printf("every ibv_qp_ex and mlx5dv_qp_ex op is set; the unmodelled ones fail their chain with EOPNOTSUPP\n");
	return 0;
}
