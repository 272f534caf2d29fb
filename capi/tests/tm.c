/* Tag-matching SRQs through the C ABI: tm_caps, ibv_create_srq_ex's checks (an extended CQ,
 * the comp_mask bits, max_num_tags), ibv_post_srq_ops (the handle written back, an unknown
 * opcode EINVAL naming the WR), an eager match read with ibv_start_poll and
 * ibv_wc_read_tm_info, and the SRQ pinning its CQ. */
#include "common.h"

static int poll_ex(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr pa = { 0 };
	for (int i = 0; i < 1000000; i++) {
		int r = ibv_start_poll(cq, &pa);
		if (r != ENOENT)
			return r;
	}
	return ETIMEDOUT;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_device_attr_ex dx;
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &dx), 0, "ibv_query_device_ex");
	if (!(dx.tm_caps.flags & IBV_TM_CAP_RC))
		SKIP("the device reports no tag matching");
	CHECK_EQ(dx.tm_caps.max_sge, 1, "tm_caps.max_sge");
	CHECK_EQ(dx.tm_caps.max_rndv_hdr_size, 64, "tm_caps.max_rndv_hdr_size");
	CHECK((dx.tm_caps.max_num_tags & (dx.tm_caps.max_num_tags + 1)) == 0, "max_num_tags %u is 2^n - 1",
	      dx.tm_caps.max_num_tags);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	struct ibv_cq *plain = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_cq_init_attr_ex ca = { .cqe = 64, .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_TM_INFO };
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
	CHECK(plain && cqx, "the CQs: %s", strerror(errno));

	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 16, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM,
		.srq_type = IBV_SRQT_TM, .pd = pd, .cq = plain, .tm_cap = { .max_num_tags = 7, .max_ops = 8 },
	};
	errno = 0;
	CHECK(!ibv_create_srq_ex(ctx, &sa) && errno == EINVAL, "a plain CQ: EINVAL (errno %d)", errno);
	sa.cq = ibv_cq_ex_to_cq(cqx);
	sa.comp_mask &= ~IBV_SRQ_INIT_ATTR_TM;
	errno = 0;
	CHECK(!ibv_create_srq_ex(ctx, &sa) && errno == EINVAL, "no IBV_SRQ_INIT_ATTR_TM: EINVAL (errno %d)", errno);
	sa.comp_mask |= IBV_SRQ_INIT_ATTR_TM;
	sa.tm_cap.max_num_tags = dx.tm_caps.max_num_tags + 1;
	errno = 0;
	CHECK(!ibv_create_srq_ex(ctx, &sa) && errno == EINVAL, "max_num_tags past tm_caps: EINVAL (errno %d)", errno);
	sa.tm_cap.max_num_tags = 7;
	struct ibv_srq *srq = ibv_create_srq_ex(ctx, &sa);
	CHECK(srq, "ibv_create_srq_ex IBV_SRQT_TM: %s", strerror(errno));
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), EBUSY, "ibv_destroy_cq of the SRQ's CQ");

	struct ibv_cq *ccq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct end c = { ccq, rc_qp(ctx, pd, ccq, 0) };
	struct ibv_qp_init_attr qi = { .send_cq = ibv_cq_ex_to_cq(cqx), .recv_cq = ibv_cq_ex_to_cq(cqx), .srq = srq,
				       .qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 0, .max_send_sge = 0 } };
	struct ibv_qp *sqp = ibv_create_qp(pd, &qi);
	CHECK(c.qp && sqp, "ibv_create_qp: %s", strerror(errno));
	connect_qp(ctx, c.qp, sqp);
	connect_qp(ctx, sqp, c.qp);

	static char sbuf[256], rbuf[256];
	struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(smr && rmr, "ibv_reg_mr");

	/* An unknown opcode: EINVAL, the WR named. */
	struct ibv_sge tsge = { .addr = (uintptr_t)rbuf, .length = 128, .lkey = rmr->lkey };
	struct ibv_ops_wr add = { .wr_id = 1, .opcode = IBV_WR_TAG_ADD, .flags = IBV_OPS_SIGNALED,
				  .tm = { .add = { .recv_wr_id = 42, .sg_list = &tsge, .num_sge = 1, .tag = 0x77,
						   .mask = ~0ULL } } };
	struct ibv_ops_wr odd = { .wr_id = 2, .opcode = (enum ibv_ops_wr_opcode)9 }, *bad = NULL;
	add.next = &odd;
	CHECK_EQ(ibv_post_srq_ops(srq, &add, &bad), EINVAL, "an unknown ops opcode");
	CHECK(bad == &odd, "bad_op names the unknown WR");
	CHECK_EQ(add.tm.handle, 0, "the ADD before it took entry 0");
	CHECK_EQ(poll_ex(cqx), 0, "the ADD's completion");
	CHECK_EQ(cqx->status, IBV_WC_SUCCESS, "ADD status");
	CHECK_EQ(ibv_wc_read_opcode(cqx), IBV_WC_TM_ADD, "ADD opcode");
	CHECK_EQ(cqx->wr_id, 1, "ADD wr_id");
	ibv_end_poll(cqx);

	/* The SRQ must hold an ordinary WQE for any message to be taken (else RNR). */
	struct ibv_sge osge = { .addr = (uintptr_t)rbuf + 128, .length = 128, .lkey = rmr->lkey };
	struct ibv_recv_wr ow = { .wr_id = 5, .sg_list = &osge, .num_sge = 1 }, *obad;
	CHECK_EQ(ibv_post_srq_recv(srq, &ow, &obad), 0, "ibv_post_srq_recv");

	/* An eager message with that tag: its data lands after the TMH. */
	struct ibv_tmh tmh = { .opcode = IBV_TMH_EAGER, .app_ctx = htobe32(0x5eed), .tag = htobe64(0x77) };
	memcpy(sbuf, &tmh, sizeof(tmh));
	strcpy(sbuf + sizeof(tmh), "tagged");
	struct ibv_sge s = { .addr = (uintptr_t)sbuf, .length = sizeof(tmh) + 6, .lkey = smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *sbad;
	CHECK_EQ(ibv_post_send(c.qp, &wr, &sbad), 0, "ibv_post_send");
	CHECK_EQ(poll_one(ccq).status, IBV_WC_SUCCESS, "the SEND");
	CHECK_EQ(poll_ex(cqx), 0, "the match");
	CHECK_EQ(cqx->status, IBV_WC_SUCCESS, "match status");
	CHECK_EQ(cqx->wr_id, 42, "match wr_id (recv_wr_id)");
	CHECK_EQ(ibv_wc_read_opcode(cqx), IBV_WC_TM_RECV, "match opcode");
	CHECK_EQ(ibv_wc_read_wc_flags(cqx), IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, "match flags");
	CHECK_EQ(ibv_wc_read_byte_len(cqx), 6, "match byte_len");
	struct ibv_wc_tm_info ti;
	ibv_wc_read_tm_info(cqx, &ti);
	CHECK_EQ(ti.tag, 0x77, "tm_info.tag");
	CHECK_EQ(ti.priv, 0x5eed, "tm_info.priv");
	ibv_end_poll(cqx);
	CHECK(memcmp(rbuf, "tagged", 6) == 0, "the tag's buffer holds the data after the TMH");

	CHECK_EQ(ibv_destroy_qp(sqp), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0, "ibv_destroy_cq once the SRQ is gone");
	printf("ok\n");
	return 0;
}
