/* Receive WQs, an indirection table and an RSS QP through the C ABI: ibv_create_wq's and
 * ibv_modify_wq's errno (libmlx5's -EINVAL for a wrong curr_wq_state), EBUSY to destroy a WQ
 * in a table and a table under a QP, an RSS QP's key length and ENOSYS to modify, and a frame
 * steered by a flow to the RSS QP completing on one of the table's WQs, on that WQ's CQ. */
#include "common.h"

static const uint8_t key[40] = {
	0x2c, 0xc6, 0x81, 0xd1, 0x5b, 0xdb, 0xf4, 0xf7, 0xfc, 0xa2, 0x83, 0x19, 0xdb, 0x1a,
	0x3e, 0x94, 0x6b, 0x9e, 0x38, 0xd9, 0x2c, 0x9c, 0x03, 0xd1, 0xad, 0x99, 0x44, 0xa7,
	0xd9, 0x56, 0x3d, 0x59, 0x06, 0x3c, 0x25, 0xf3, 0xfc, 0x1f, 0xdc, 0x2a,
};
static const uint8_t dst_mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	struct ibv_context *ctx = ibv_open_device(dev), *tx_ctx = ibv_open_device(dev);
	CHECK(ctx && tx_ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cqs[2] = { ibv_create_cq(ctx, 64, NULL, NULL, 0), ibv_create_cq(ctx, 64, NULL, NULL, 0) };
	CHECK(pd && cqs[0] && cqs[1], "PD and CQs");
	struct ibv_wq_init_attr wa = { .wq_type = IBV_WQT_RQ, .max_wr = 0, .max_sge = 1, .pd = pd, .cq = cqs[0] };
	CHECK(!ibv_create_wq(ctx, &wa) && errno == EINVAL, "a WQ of max_wr 0: %s", strerror(errno));
	struct ibv_wq *wqs[4];
	for (int i = 0; i < 4; i++) {
		wa.max_wr = 16;
		wa.cq = cqs[i % 2];
		wqs[i] = ibv_create_wq(ctx, &wa);
		if (!wqs[i] && errno == EOPNOTSUPP)
			SKIP("no receive WQs");
		CHECK(wqs[i], "ibv_create_wq: %s", strerror(errno));
		CHECK_EQ(wqs[i]->state, IBV_WQS_RESET, "a new WQ's state");
	}
	struct ibv_wq_attr m = { .attr_mask = IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE,
				 .wq_state = IBV_WQS_RDY, .curr_wq_state = IBV_WQS_ERR };
	CHECK_EQ(ibv_modify_wq(wqs[0], &m), -EINVAL, "RDY from a wrong curr_wq_state");
	m.attr_mask = IBV_WQ_ATTR_STATE;
	m.wq_state = IBV_WQS_ERR;
	CHECK_EQ(ibv_modify_wq(wqs[0], &m), EINVAL, "RESET to ERR");
	m.wq_state = IBV_WQS_RDY;
	for (int i = 0; i < 4; i++)
		CHECK_EQ(ibv_modify_wq(wqs[i], &m), 0, "RESET to RDY");
	struct ibv_rwq_ind_table_init_attr ta = { .log_ind_tbl_size = 2, .ind_tbl = wqs };
	struct ibv_rwq_ind_table *t = ibv_create_rwq_ind_table(ctx, &ta);
	CHECK(t, "ibv_create_rwq_ind_table: %s", strerror(errno));
	CHECK_EQ(ibv_destroy_wq(wqs[1]), EBUSY, "ibv_destroy_wq of a WQ in a table");

	struct ibv_rx_hash_conf h = { .rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ, .rx_hash_key_len = 16,
				      .rx_hash_key = (uint8_t *)key,
				      .rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 };
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_RAW_PACKET, .pd = pd, .rwq_ind_tbl = t, .rx_hash_conf = h,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH,
	};
	CHECK(!ibv_create_qp_ex(ctx, &qa) && errno == EINVAL, "a 16-byte key: %s", strerror(errno));
	qa.rx_hash_conf.rx_hash_key_len = 40;
	struct ibv_qp *rss = ibv_create_qp_ex(ctx, &qa);
	CHECK(rss, "an RSS QP: %s", strerror(errno));
	struct ibv_qp_attr qattr = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK_EQ(ibv_modify_qp(rss, &qattr, IBV_QP_STATE | IBV_QP_PORT), ENOSYS, "ibv_modify_qp of an RSS QP");
	CHECK_EQ(ibv_destroy_rwq_ind_table(t), EBUSY, "a table under an RSS QP");

	struct {
		struct ibv_flow_attr attr;
		struct ibv_flow_spec_eth eth;
	} fa = {
		.attr = { .type = IBV_FLOW_ATTR_NORMAL, .size = sizeof(fa), .num_of_specs = 1, .port = 1 },
		.eth = { .type = IBV_FLOW_SPEC_ETH, .size = sizeof(struct ibv_flow_spec_eth) },
	};
	memcpy(fa.eth.val.dst_mac, dst_mac, 6);
	memset(fa.eth.mask.dst_mac, 0xff, 6);
	struct ibv_flow *flow = ibv_create_flow(rss, &fa.attr);
	CHECK(flow, "ibv_create_flow to the RSS QP: %s", strerror(errno));

	static uint8_t rx[4][64], frame[64];
	struct ibv_mr *rmr = ibv_reg_mr(pd, rx, sizeof(rx), IBV_ACCESS_LOCAL_WRITE);
	CHECK(rmr, "ibv_reg_mr");
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)rx[i], .length = 64, .lkey = rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK_EQ(ibv_post_wq_recv(wqs[i], &wr, &bad), 0, "ibv_post_wq_recv");
	}

	struct ibv_pd *tpd = ibv_alloc_pd(tx_ctx);
	struct ibv_cq *tcq = ibv_create_cq(tx_ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr tia = { .send_cq = tcq, .recv_cq = tcq, .qp_type = IBV_QPT_RAW_PACKET,
					.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *tx = ibv_create_qp(tpd, &tia);
	CHECK(tx, "a raw packet QP: %s", strerror(errno));
	CHECK_EQ(ibv_modify_qp(tx, &qattr, IBV_QP_STATE | IBV_QP_PORT), 0, "INIT");
	qattr.qp_state = IBV_QPS_RTR;
	CHECK_EQ(ibv_modify_qp(tx, &qattr, IBV_QP_STATE), 0, "RTR");
	qattr.qp_state = IBV_QPS_RTS;
	CHECK_EQ(ibv_modify_qp(tx, &qattr, IBV_QP_STATE), 0, "RTS");
	memcpy(frame, dst_mac, 6);
	frame[12] = 0x08;
	frame[14] = 0x45;
	frame[23] = 17;
	memcpy(frame + 26, (uint8_t[]){ 1, 2, 3, 4, 5, 6, 7, 8 }, 8);
	struct ibv_mr *tmr = ibv_reg_mr(tpd, frame, sizeof(frame), 0);
	CHECK(tmr, "ibv_reg_mr");
	struct ibv_sge tsge = { .addr = (uintptr_t)frame, .length = 64, .lkey = tmr->lkey };
	struct ibv_send_wr swr = { .wr_id = 1, .sg_list = &tsge, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *sbad;
	CHECK_EQ(ibv_post_send(tx, &swr, &sbad), 0, "ibv_post_send of a frame");
	struct ibv_wc wc;
	int got = 0;
	for (int spin = 0; spin < 1000000 && !got; spin++)
		got = ibv_poll_cq(tcq, 1, &wc);
	CHECK(got == 1 && wc.status == IBV_WC_SUCCESS, "the frame's send completion");
	got = 0;
	int which = -1;
	for (int spin = 0; spin < 1000000 && which < 0; spin++)
		for (int c = 0; c < 2 && which < 0; c++)
			if (ibv_poll_cq(cqs[c], 1, &wc) == 1)
				which = c;
	CHECK(which >= 0, "no receive completion on the WQs' CQs");
	CHECK_EQ(wc.status, IBV_WC_SUCCESS, "the receive's status");
	CHECK_EQ(wc.byte_len, 64, "the receive's byte_len");
	int at = (int)wc.wr_id - 100;
	CHECK(at >= 0 && at < 4 && at % 2 == which, "wr_id %llu on CQ %d", (unsigned long long)wc.wr_id, which);
	CHECK_EQ(wc.qp_num, wqs[at]->wq_num, "the completion names its WQ");
	CHECK(memcmp(rx[at], frame, 64) == 0, "the frame's bytes");

	CHECK_EQ(ibv_destroy_flow(flow), 0, "ibv_destroy_flow");
	CHECK_EQ(ibv_destroy_qp(rss), 0, "ibv_destroy_qp of the RSS QP");
	CHECK_EQ(ibv_destroy_rwq_ind_table(t), 0, "ibv_destroy_rwq_ind_table");
	for (int i = 0; i < 4; i++)
		CHECK_EQ(ibv_destroy_wq(wqs[i]), 0, "ibv_destroy_wq");
	ibv_destroy_qp(tx);
	ibv_dereg_mr(tmr);
	ibv_dereg_mr(rmr);
	ibv_destroy_cq(tcq);
	ibv_destroy_cq(cqs[0]);
	ibv_destroy_cq(cqs[1]);
	ibv_dealloc_pd(tpd);
	ibv_dealloc_pd(pd);
	ibv_close_device(tx_ctx);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("rss: ok\n");
	return 0;
}
