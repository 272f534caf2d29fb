/* UD QPs through the C ABI, on one device: INIT with PKEY_INDEX|PORT|QKEY, RTR with the state
 * alone, RTS with SQ_PSN; a SEND to an address handle with wr.ud, the receive buffer's
 * 40-byte GRH area first, byte_len + 40, src_qp and IBV_WC_GRH; an answer by
 * ibv_create_ah_from_wc with ibv_wr_set_ud_addr and an immediate; a wrong Q_Key dropped. */
#include "common.h"

#define QKEY 0x11111111

static struct ibv_qp *ud_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);
	CHECK(qp, "ibv_create_qp_ex(UD): %s", strerror(errno));
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY };
	CHECK_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL,
		 "INIT without QKEY");
	CHECK_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0,
		 "INIT");
	attr.qp_state = IBV_QPS_RTR;
	CHECK_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE), 0, "RTR");
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0x123;
	CHECK_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN), 0, "RTS");
	return qp;
}

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *at, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)at, .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK_EQ(ibv_post_recv(qp, &wr, &bad), 0, "ibv_post_recv");
}

/* The next completion with wr_id `id` out of `n` waiting (in-process ones may come in either
 * order). */
static struct ibv_wc take(struct ibv_cq *cq, uint64_t id, struct ibv_wc *seen, int *n)
{
	for (;;) {
		for (int i = 0; i < *n; i++)
			if (seen[i].wr_id == id) {
				struct ibv_wc w = seen[i];
				seen[i] = seen[--*n];
				return w;
			}
		seen[(*n)++] = poll_one(cq);
	}
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_port_attr port;
	CHECK_EQ(ibv_query_port(ctx, 1, &port), 0, "ibv_query_port");
	if (port.link_layer != IBV_LINK_LAYER_ETHERNET)
		SKIP("the address handles here are RoCE ones");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	static uint8_t buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd && cq && mr, "pd, cq, mr");
	struct ibv_qp *a = ud_qp(ctx, pd, cq), *b = ud_qp(ctx, pd, cq);

	union ibv_gid gid;
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0, "ibv_query_gid");
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = gid, .hop_limit = 1 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));

	memset(buf, 0x5a, 100);
	memset(buf + 1024, 0, 1024);
	post_recv(b, mr, buf + 1024, 512, 10);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 100, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = b->qp_num;
	wr.wr.ud.remote_qkey = QKEY + 1;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "a SEND with the wrong Q_Key");
	wr.wr_id = 2;
	wr.wr.ud.remote_qkey = QKEY;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "a SEND with the QP's Q_Key");
	struct ibv_wc seen[8];
	int n = 0;
	struct ibv_wc w = take(cq, 1, seen, &n);
	CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_SEND, "the first SEND: status %d", w.status);
	w = take(cq, 2, seen, &n);
	CHECK(w.status == IBV_WC_SUCCESS, "the second SEND: status %d", w.status);
	struct ibv_wc r = take(cq, 10, seen, &n);
	CHECK(r.status == IBV_WC_SUCCESS && r.opcode == IBV_WC_RECV, "the receive: status %d", r.status);
	CHECK_EQ(r.byte_len, 140, "byte_len: the payload and the GRH area");
	CHECK_EQ(r.src_qp, a->qp_num, "src_qp");
	CHECK(r.wc_flags & IBV_WC_GRH, "IBV_WC_GRH in wc_flags 0x%x", r.wc_flags);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(buf[1024 + 40 + i], 0x5a, "the payload after the GRH area");
	CHECK(n == 0 && ibv_poll_cq(cq, 1, &w) == 0, "the wrong Q_Key's datagram took no receive");

	/* The answer: an AH from the completion and its GRH, through the ibv_wr_* API. */
	struct ibv_ah *back = ibv_create_ah_from_wc(pd, &r, (struct ibv_grh *)(buf + 1024), 1);
	CHECK(back, "ibv_create_ah_from_wc: %s", strerror(errno));
	post_recv(a, mr, buf + 2048, 512, 11);
	struct ibv_qp_ex *bx = ibv_qp_to_qp_ex(b);
	CHECK(bx, "ibv_qp_to_qp_ex");
	ibv_wr_start(bx);
	bx->wr_id = 3;
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(bx, htonl(0x77));
	ibv_wr_set_ud_addr(bx, back, r.src_qp, QKEY);
	ibv_wr_set_sge(bx, mr->lkey, (uintptr_t)buf, 20);
	CHECK_EQ(ibv_wr_complete(bx), 0, "ibv_wr_complete");
	w = take(cq, 3, seen, &n);
	CHECK(w.status == IBV_WC_SUCCESS, "the answer: status %d", w.status);
	r = take(cq, 11, seen, &n);
	CHECK(r.status == IBV_WC_SUCCESS && r.byte_len == 60 && r.src_qp == b->qp_num, "the answer's receive");
	CHECK((r.wc_flags & IBV_WC_WITH_IMM) && ntohl(r.imm_data) == 0x77, "its immediate");

	CHECK_EQ(ibv_destroy_ah(back), 0, "ibv_destroy_ah");
	CHECK_EQ(ibv_destroy_ah(ah), 0, "ibv_destroy_ah");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("UD: wr.ud and ibv_wr_set_ud_addr, the GRH area, src_qp, a wrong Q_Key dropped, "
	       "an answer by ibv_create_ah_from_wc\n");
	return 0;
}
