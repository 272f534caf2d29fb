/* XRC through the C ABI: ibv_open_xrcd's comp_mask and oflags refusals and the domain of a
 * file, an XRC SRQ by ibv_create_srq_ex (its refusal without a CQ, ibv_get_srq_num, the
 * domain held while it lives), a target QP by ibv_create_qp_ex and a second handle on it by
 * ibv_open_qp (its comp_mask refusals), then SENDs from an initiator into the SRQ, one by
 * ibv_wr_set_xrc_srqn and one by ibv_post_send's qp_type.xrc.remote_srqn. */
#include <fcntl.h>
#include <unistd.h>
#include "common.h"

static struct ibv_xrcd *open_xrcd(struct ibv_context *ctx, uint32_t mask, int fd, int oflags)
{
	struct ibv_xrcd_init_attr a = { .comp_mask = mask, .fd = fd, .oflags = oflags };
	errno = 0;
	return ibv_open_xrcd(ctx, &a);
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	CHECK_EQ(ibv_modify_qp(qp, a, mask), 0, what);
}

/* INIT, RTR towards peer_qpn, then RTS, with the masks ibv_xsrq_pingpong uses. */
static void bring_up(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t peer_qpn, int target)
{
	struct ibv_port_attr port;
	CHECK(ibv_query_port(ctx, 1, &port) == 0, "ibv_query_port");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = target ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0 };
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = peer_qpn;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = port.lid;
	if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.hop_limit = 1;
		CHECK(ibv_query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid) == 0, "ibv_query_gid");
	}
	int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	modify(qp, &a, target ? rtr | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : rtr, "RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	int rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
	modify(qp, &a, target ? rts : rts | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
}

static void expect_recv(struct ibv_cq *cq, uint64_t id, uint32_t tgt, uint32_t ini, uint32_t len)
{
	struct ibv_wc wc = poll_one(cq);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS, "the receive's status");
	CHECK_EQ(wc.wr_id, id, "the receive's wr_id");
	CHECK_EQ(wc.qp_num, tgt, "the receive's qp_num: the target QP");
	CHECK_EQ(wc.src_qp, ini, "the receive's src_qp: the initiator");
	CHECK_EQ(wc.byte_len, len, "the receive's byte_len");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_device_attr da;
	CHECK_EQ(ibv_query_device(ctx, &da), 0, "ibv_query_device");
	if (!(da.device_cap_flags & IBV_DEVICE_XRC))
		SKIP("the device has no XRC");
	uint32_t both = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	CHECK(!open_xrcd(ctx, IBV_XRCD_INIT_ATTR_FD, -1, 0) && errno == EINVAL, "without OFLAGS: EINVAL");
	CHECK(!open_xrcd(ctx, both | IBV_XRCD_INIT_ATTR_RESERVED, -1, 0) && errno == EOPNOTSUPP,
	      "a reserved comp_mask bit: EOPNOTSUPP");
	char path[] = "/tmp/mlx5sim-xrc-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	unlink(path);
	CHECK(!open_xrcd(ctx, both, fd, 0) && errno == EAGAIN, "a file with no domain, without O_CREAT: EAGAIN");
	struct ibv_xrcd *x = open_xrcd(ctx, both, fd, O_CREAT);
	CHECK(x, "ibv_open_xrcd O_CREAT: %s", strerror(errno));
	CHECK(!open_xrcd(ctx, both, fd, O_CREAT | O_EXCL) && errno == EINVAL, "O_EXCL on a file with a domain");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0), *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && scq && rcq, "PD and CQs");
	struct ibv_srq_init_attr_ex sa = { .attr = { .max_wr = 8, .max_sge = 1 },
					   .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
							IBV_SRQ_INIT_ATTR_PD,
					   .srq_type = IBV_SRQT_XRC, .xrcd = x, .pd = pd };
	errno = 0;
	CHECK(!ibv_create_srq_ex(ctx, &sa) && errno == EINVAL, "an XRC SRQ without IBV_SRQ_INIT_ATTR_CQ: EINVAL");
	sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	sa.cq = rcq;
	struct ibv_srq *srq = ibv_create_srq_ex(ctx, &sa);
	CHECK(srq, "ibv_create_srq_ex XRC: %s", strerror(errno));
	uint32_t srqn = 0;
	CHECK_EQ(ibv_get_srq_num(srq, &srqn), 0, "ibv_get_srq_num");
	CHECK(srqn != 0, "an SRQ number");
	CHECK_EQ(ibv_close_xrcd(x), EBUSY, "ibv_close_xrcd while its SRQ lives");

	struct ibv_qp_init_attr_ex ta = { .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x };
	struct ibv_qp *tgt = ibv_create_qp_ex(ctx, &ta);
	CHECK(tgt, "an XRC_RECV QP: %s", strerror(errno));
	struct ibv_qp_open_attr oa = { .comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD,
				       .qp_num = tgt->qp_num, .xrcd = x, .qp_type = IBV_QPT_XRC_RECV };
	errno = 0;
	CHECK(!ibv_open_qp(ctx, &oa) && errno == EINVAL, "ibv_open_qp without IBV_QP_OPEN_ATTR_TYPE: EINVAL");
	oa.comp_mask |= IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_RESERVED;
	errno = 0;
	CHECK(!ibv_open_qp(ctx, &oa) && errno == EOPNOTSUPP, "a reserved open comp_mask bit: EOPNOTSUPP");
	oa.comp_mask &= ~IBV_QP_OPEN_ATTR_RESERVED;
	struct ibv_qp *opened = ibv_open_qp(ctx, &oa);
	CHECK(opened && opened->qp_num == tgt->qp_num, "ibv_open_qp of the target: %s", strerror(errno));

	struct ibv_qp_init_attr_ex ia = { .qp_type = IBV_QPT_XRC_SEND, .send_cq = scq,
					  .cap = { .max_send_wr = 8, .max_send_sge = 1 },
					  .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
					  .send_ops_flags = IBV_QP_EX_WITH_SEND };
	struct ibv_qp *ini = ibv_create_qp_ex(ctx, &ia);
	CHECK(ini, "an XRC_SEND QP: %s", strerror(errno));
	bring_up(ctx, tgt, ini->qp_num, 1);
	bring_up(ctx, ini, tgt->qp_num, 0);

	static char buf[4096];
	for (int i = 0; i < 256; i++)
		buf[i] = (char)i;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr");
	for (uint64_t i = 0; i < 2; i++) {
		struct ibv_sge s = { .addr = (uintptr_t)buf + 1024 + i * 512, .length = 512, .lkey = mr->lkey };
		struct ibv_recv_wr r = { .wr_id = 50 + i, .sg_list = &s, .num_sge = 1 }, *bad;
		CHECK_EQ(ibv_post_srq_recv(srq, &r, &bad), 0, "ibv_post_srq_recv");
	}
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(ini);
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_xrc_srqn(qx, srqn);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 100);
	CHECK_EQ(ibv_wr_complete(qx), 0, "ibv_wr_complete");
	CHECK_EQ(poll_one(scq).status, IBV_WC_SUCCESS, "the ibv_wr_send's completion");
	expect_recv(rcq, 50, tgt->qp_num, ini->qp_num, 100);
	struct ibv_sge s = { .addr = (uintptr_t)buf + 10, .length = 200, .lkey = mr->lkey };
	struct ibv_send_wr w = { .wr_id = 2, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.qp_type.xrc.remote_srqn = srqn;
	CHECK_EQ(ibv_post_send(ini, &w, &bad), 0, "ibv_post_send with remote_srqn");
	CHECK_EQ(poll_one(scq).status, IBV_WC_SUCCESS, "the ibv_post_send's completion");
	expect_recv(rcq, 51, tgt->qp_num, ini->qp_num, 200);
	CHECK(memcmp(buf + 1024, buf, 100) == 0 && memcmp(buf + 1536, buf + 10, 200) == 0, "the bytes received");

	CHECK_EQ(ibv_destroy_qp(ini), 0, "destroy the initiator");
	CHECK_EQ(ibv_destroy_qp(tgt), 0, "destroy the creator's target handle");
	CHECK_EQ(ibv_destroy_qp(opened), 0, "destroy the opened handle");
	CHECK_EQ(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
	CHECK_EQ(ibv_close_xrcd(x), 0, "ibv_close_xrcd once unused");
	close(fd);
	printf("xrc: ok\n");
	return 0;
}
