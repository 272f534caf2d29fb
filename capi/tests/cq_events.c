/* CQs and completion channels as libibverbs and libmlx5 answer: arming a CQ without a channel,
 * arming for solicited completions only, a channel still in use, polls of a negative count, a
 * completion vector past the last; and ibv_post_send's own checks (no state check, ENOMEM before
 * the first RTS, a bad opcode), sq_sig_all on ibv_create_qp, and who a receive came from. */
#include <poll.h>
#include "common.h"

static int readable(struct ibv_comp_channel *ch, int ms)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	return poll(&pfd, 1, ms);
}

static void send_one(struct ibv_qp *qp, struct ibv_mr *mr, uint64_t wr_id, unsigned flags, uint32_t imm)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED | flags, .imm_data = htonl(imm) }, *bad = NULL;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send(SEND)");
}

static void recv_one(struct ibv_qp *qp, struct ibv_mr *mr, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	CHECK_EQ(ibv_post_recv(qp, &wr, &bad), 0, "ibv_post_recv");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");

	/* A completion vector at or past num_comp_vectors: the kernel's EINVAL. */
	errno = 0;
	CHECK(!ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors), "a CQ on vector num_comp_vectors");
	CHECK_EQ(errno, EINVAL, "errno of a CQ on vector num_comp_vectors");
	errno = 0;
	CHECK(!ibv_create_cq(ctx, 16, NULL, NULL, -1), "a CQ on vector -1");
	CHECK_EQ(errno, EINVAL, "errno of a CQ on vector -1");

	/* Arming a CQ without a channel rings the doorbell and returns 0; a negative poll is 0. */
	struct ibv_cq *cq_a = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cq_a, "ibv_create_cq");
	CHECK_EQ(ibv_req_notify_cq(cq_a, 0), 0, "ibv_req_notify_cq without a channel");
	CHECK_EQ(ibv_req_notify_cq(cq_a, 1), 0, "ibv_req_notify_cq(solicited) without a channel");
	struct ibv_wc wc;
	CHECK_EQ(ibv_poll_cq(cq_a, -1, &wc), 0, "ibv_poll_cq of -1 entries");
	CHECK_EQ(ibv_poll_cq(cq_a, 0, NULL), 0, "ibv_poll_cq of 0 entries");

	/* A channel with a CQ on it: EBUSY, returned, not set in errno. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "ibv_create_comp_channel");
	struct ibv_cq *cq_b = ibv_create_cq(ctx, 64, (void *)0xb, ch, 0);
	CHECK(cq_b, "ibv_create_cq on the channel");
	CHECK_EQ(ibv_destroy_comp_channel(ch), EBUSY, "ibv_destroy_comp_channel with a CQ on it");

	/* ibv_post_send has no state check: before the first RTS every WR is ENOMEM. */
	struct ibv_qp *a = rc_qp(ctx, pd, cq_a, 0), *b = rc_qp(ctx, pd, cq_b, 0);
	CHECK(a && b, "create the QPs: %s", strerror(errno));
	uint8_t *buf = calloc(1, 4096);
	CHECK(buf, "calloc");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)buf;
	wr.wr.rdma.rkey = mr->rkey;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), ENOMEM, "ibv_post_send without SGEs on a new QP");
	CHECK(bad == &wr, "bad_wr names the WR");
	connect_qp(ctx, a, b);
	connect_qp(ctx, b, a);
	struct ibv_send_wr second = wr;
	second.wr_id = 2;
	second.opcode = 12;
	wr.next = &second;
	bad = NULL;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), EINVAL, "a list whose second WR has opcode 12");
	CHECK(bad == &second, "bad_wr names the second WR");
	struct ibv_wc got = poll_one(cq_a);
	CHECK(got.status == IBV_WC_SUCCESS && got.wr_id == 1, "the first WR was posted: status %d wr_id %llu",
	      got.status, (unsigned long long)got.wr_id);

	/* Armed for solicited completions only: a plain SEND does not wake the channel, a
	 * solicited one does. The receive completion names the sender. */
	CHECK_EQ(ibv_req_notify_cq(cq_b, 1), 0, "ibv_req_notify_cq(solicited_only)");
	recv_one(b, mr, 10);
	send_one(a, mr, 11, 0, 0x12345678);
	got = poll_one(cq_a);
	CHECK(got.status == IBV_WC_SUCCESS && got.wr_id == 11, "the plain SEND completed");
	CHECK_EQ(readable(ch, 200), 0, "a plain SEND leaves the channel quiet");
	recv_one(b, mr, 12);
	send_one(a, mr, 13, IBV_SEND_SOLICITED, 0xabcd);
	got = poll_one(cq_a);
	CHECK(got.status == IBV_WC_SUCCESS && got.wr_id == 13, "the solicited SEND completed");
	CHECK_EQ(readable(ch, 1000), 1, "a solicited SEND wakes the channel");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0, "ibv_get_cq_event");
	CHECK(ev_cq == cq_b && ev_ctx == (void *)0xb, "the event names the CQ");
	ibv_ack_cq_events(ev_cq, 1);
	got = poll_one(cq_b);
	CHECK(got.status == IBV_WC_SUCCESS && got.wr_id == 10, "the first receive");
	CHECK_EQ(got.src_qp, a->qp_num, "src_qp of a receive");
	CHECK_EQ(got.pkey_index, 0x5678, "pkey_index: the immediate's low 16 bits");
	got = poll_one(cq_b);
	CHECK(got.status == IBV_WC_SUCCESS && got.wr_id == 12, "the second receive");

	/* sq_sig_all on ibv_create_qp: an unsignalled WR completes. */
	struct ibv_qp_init_attr ia = { .send_cq = cq_a, .recv_cq = cq_a, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *all = ibv_create_qp(pd, &ia);
	CHECK(all, "ibv_create_qp with sq_sig_all: %s", strerror(errno));
	connect_qp(ctx, all, all);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr quiet = { .wr_id = 20, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE };
	quiet.wr.rdma.remote_addr = (uintptr_t)buf + 64;
	quiet.wr.rdma.rkey = mr->rkey;
	CHECK_EQ(ibv_post_send(all, &quiet, &bad), 0, "an unsignalled WRITE");
	got = poll_one(cq_a);
	CHECK(got.status == IBV_WC_SUCCESS && got.wr_id == 20, "sq_sig_all completes it");

	CHECK_EQ(ibv_destroy_qp(all), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(a), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(b), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_cq(cq_b), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel once its CQ is gone");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_destroy_cq(cq_a), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	free(buf);
	printf("cq_events: ok\n");
	return 0;
}
