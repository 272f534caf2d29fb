/* RC loopback on the program's own memory: RDMA WRITE, READ and SEND through ibv_post_send
 * and through the ibv_wr_* API; completions by polling and through a completion channel. */
#include <poll.h>
#include "common.h"

enum { LEN = 4096 };

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed) | 1;
}

static void expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode op, const char *what)
{
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_SUCCESS, "%s: status %s (vendor_err %#x)", what, ibv_wc_status_str(wc.status),
	      wc.vendor_err);
	CHECK_EQ(wc.wr_id, wr_id, what);
	CHECK_EQ(wc.opcode, op, what);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "ibv_create_comp_channel");
	struct ibv_cq *cq_a = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cq_b = ibv_create_cq(ctx, 64, (void *)0x5eed, ch, 0);
	CHECK(cq_a && cq_b, "ibv_create_cq");
	struct ibv_qp *a = rc_qp(ctx, pd, cq_a, 0), *b = rc_qp(ctx, pd, cq_b, 0);
	CHECK(a && b, "ibv_create_qp_ex: %s", strerror(errno));
	connect_qp(ctx, a, b);
	connect_qp(ctx, b, a);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(a, &qa, IBV_QP_STATE, &qi), 0, "ibv_query_qp");
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS, "QP state after connecting");

	uint8_t *src = malloc(LEN), *dst = malloc(LEN);
	uint8_t stack[256];
	CHECK(src && dst, "malloc");
	fill(src, LEN, 7);
	memset(dst, 0, LEN);
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *mr_src = ibv_reg_mr(pd, src, LEN, rw), *mr_dst = ibv_reg_mr(pd, dst, LEN, rw);
	struct ibv_mr *mr_stack = ibv_reg_mr(pd, stack, sizeof(stack), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr_src && mr_dst && mr_stack, "ibv_reg_mr: %s", strerror(errno));

	/* RDMA WRITE through ibv_post_send. */
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = LEN, .lkey = mr_src->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = mr_dst->rkey;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "ibv_post_send(RDMA WRITE)");
	expect_wc(cq_a, 1, IBV_WC_RDMA_WRITE, "RDMA WRITE completion");
	CHECK(memcmp(src, dst, LEN) == 0, "RDMA WRITE delivered the bytes");

	/* RDMA READ through the ibv_wr_* API: 256 bytes of dst into the stack buffer. */
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a);
	CHECK(x, "ibv_qp_to_qp_ex");
	ibv_wr_start(x);
	x->wr_id = 2;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(x, mr_dst->rkey, (uintptr_t)dst + 100);
	ibv_wr_set_sge(x, mr_stack->lkey, (uintptr_t)stack, sizeof(stack));
	CHECK_EQ(ibv_wr_complete(x), 0, "ibv_wr_complete(RDMA READ)");
	expect_wc(cq_a, 2, IBV_WC_RDMA_READ, "RDMA READ completion");
	CHECK(memcmp(stack, src + 100, sizeof(stack)) == 0, "RDMA READ brought the bytes");

	/* SEND through ibv_wr_* into a posted receive; its completion wakes the channel. */
	memset(dst, 0, LEN);
	struct ibv_sge rsge = { .addr = (uintptr_t)dst, .length = LEN, .lkey = mr_dst->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = &rsge, .num_sge = 1 }, *rbad = NULL;
	CHECK_EQ(ibv_post_recv(b, &rwr, &rbad), 0, "ibv_post_recv");
	CHECK_EQ(ibv_req_notify_cq(cq_b, 0), 0, "ibv_req_notify_cq");
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	CHECK_EQ(poll(&pfd, 1, 0), 0, "the channel is quiet before the SEND");
	ibv_wr_start(x);
	x->wr_id = 4;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(x, htonl(0xabcd));
	ibv_wr_set_sge(x, mr_src->lkey, (uintptr_t)src, 1000);
	CHECK_EQ(ibv_wr_complete(x), 0, "ibv_wr_complete(SEND)");
	expect_wc(cq_a, 4, IBV_WC_SEND, "SEND completion");
	CHECK_EQ(poll(&pfd, 1, 1000), 1, "the channel's fd became readable");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0, "ibv_get_cq_event");
	CHECK(ev_cq == cq_b && ev_ctx == (void *)0x5eed, "the event names the receive CQ and its context");
	ibv_ack_cq_events(ev_cq, 1);
	struct ibv_wc wc = poll_one(cq_b);
	CHECK(wc.status == IBV_WC_SUCCESS, "receive status %s", ibv_wc_status_str(wc.status));
	CHECK_EQ(wc.wr_id, 3, "receive wr_id");
	CHECK_EQ(wc.opcode, IBV_WC_RECV, "receive opcode");
	CHECK_EQ(wc.byte_len, 1000, "receive byte_len");
	CHECK(wc.wc_flags & IBV_WC_WITH_IMM, "receive has immediate data");
	CHECK_EQ(ntohl(wc.imm_data), 0xabcd, "immediate data");
	CHECK(memcmp(dst, src, 1000) == 0, "SEND delivered the bytes");

	/* An rkey the responder does not have: a remote access error, and the QP goes to ERR. */
	wr.wr_id = 5;
	wr.wr.rdma.rkey = mr_dst->rkey ^ 0x100;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "ibv_post_send(bad rkey)");
	wc = poll_one(cq_a);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR, "bad rkey completes with a remote access error");

	CHECK_EQ(ibv_destroy_qp(a), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(b), 0, "ibv_destroy_qp");
	CHECK(ibv_dealloc_pd(pd) != 0, "ibv_dealloc_pd fails while MRs use the PD");
	CHECK_EQ(ibv_dereg_mr(mr_src), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_dereg_mr(mr_dst), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_dereg_mr(mr_stack), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_destroy_cq(cq_a), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_destroy_cq(cq_b), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	free(src);
	free(dst);
	printf("PASS\n");
	return 0;
}
