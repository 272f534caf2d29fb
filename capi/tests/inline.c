/* Inline data: IBV_SEND_INLINE on ibv_post_send and ibv_wr_set_inline_data(_list) copy the
 * payload into the WQE when posting, so it comes from unregistered memory with any lkey; more
 * than the QP's max_inline_data is ENOMEM (set_data_inl_seg, _mlx5_send_wr_set_inline_data);
 * zero bytes inline is an empty message; WQEs of two basic blocks wrap around the ring. */
#include "common.h"

enum { LEN = 256 };

static struct ibv_cq *cq_a, *cq_b;
static struct ibv_qp *a, *b;
static struct ibv_mr *mr_dst;
static uint8_t dst[LEN];

static void post_recv_b(void)
{
	struct ibv_sge sge = { .addr = (uintptr_t)dst, .length = LEN, .lkey = mr_dst->lkey };
	struct ibv_recv_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK_EQ(ibv_post_recv(b, &wr, &bad), 0, "ibv_post_recv");
}

static void expect(struct ibv_cq *cq, uint64_t wr_id, uint32_t byte_len, const char *what)
{
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_SUCCESS, "%s: status %s", what, ibv_wc_status_str(wc.status));
	CHECK_EQ(wc.wr_id, wr_id, what);
	if (byte_len != UINT32_MAX)
		CHECK_EQ(wc.byte_len, byte_len, what);
}

static void pattern(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	cq_a = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	cq_b = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq_a && cq_b, "resources");
	struct ibv_qp_init_attr_ex attr = {
		.send_cq = cq_a, .recv_cq = cq_a, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 4, .max_recv_sge = 1,
			 .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
	};
	a = ibv_create_qp_ex(ctx, &attr);
	CHECK(a, "ibv_create_qp_ex: %s", strerror(errno));
	uint32_t max_inline = attr.cap.max_inline_data;
	CHECK(max_inline >= 64 && max_inline < LEN, "max_inline_data %u", max_inline);
	attr.send_cq = attr.recv_cq = cq_b;
	b = ibv_create_qp_ex(ctx, &attr);
	CHECK(b, "ibv_create_qp_ex: %s", strerror(errno));
	connect_qp(ctx, a, b);
	connect_qp(ctx, b, a);
	mr_dst = ibv_reg_mr(pd, dst, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr_dst, "ibv_reg_mr");

	/* ibv_post_send, SEND: from the stack, never registered, under a made-up lkey. */
	uint8_t src[LEN], want[LEN];
	pattern(src, 40, 1);
	memcpy(want, src, 40);
	struct ibv_sge sg[3] = { { .addr = (uintptr_t)src, .length = 30, .lkey = 0xdeadbeef },
				 { .addr = (uintptr_t)src + 30, .length = 10, .lkey = 0 } };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = sg, .num_sge = 2, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED }, *bad = NULL;
	post_recv_b();
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "inline SEND through ibv_post_send");
	memset(src, 0, 40); /* copied when posted */
	expect(cq_a, 1, UINT32_MAX, "inline SEND");
	expect(cq_b, 9, 40, "the inline SEND's receive");
	CHECK(memcmp(dst, want, 40) == 0, "the inline SEND's bytes");

	/* ibv_post_send, RDMA WRITE of exactly max_inline_data bytes. */
	pattern(src, max_inline, 3);
	sg[0] = (struct ibv_sge){ .addr = (uintptr_t)src, .length = max_inline, .lkey = 0 };
	wr = (struct ibv_send_wr){ .wr_id = 2, .sg_list = sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				   .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED };
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = mr_dst->rkey;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "inline WRITE of max_inline_data bytes");
	expect(cq_a, 2, UINT32_MAX, "inline WRITE");
	CHECK(memcmp(dst, src, max_inline) == 0, "the inline WRITE's bytes");

	/* One byte more: ENOMEM, the WR named, nothing posted. */
	sg[0].length = max_inline + 1;
	wr.wr_id = 3;
	bad = NULL;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), ENOMEM, "inline WRITE over max_inline_data");
	CHECK(bad == &wr, "bad_wr names the inline WR");
	struct ibv_wc wc;
	CHECK_EQ(ibv_poll_cq(cq_a, 1, &wc), 0, "nothing completes after ENOMEM");

	/* The ibv_wr_* API: SEND with inline data, WRITE with a list of three buffers. */
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(a);
	CHECK(qx, "ibv_qp_to_qp_ex");
	pattern(src, 50, 5);
	post_recv_b();
	ibv_wr_start(qx);
	qx->wr_id = 4;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_inline_data(qx, src, 50);
	CHECK_EQ(ibv_wr_complete(qx), 0, "ibv_wr_set_inline_data");
	expect(cq_a, 4, UINT32_MAX, "ibv_wr_send + inline");
	expect(cq_b, 9, 50, "its receive");
	CHECK(memcmp(dst, src, 50) == 0, "ibv_wr_set_inline_data's bytes");

	uint8_t x[5] = "hello", y[1] = { '-' }, z[6] = "world!";
	struct ibv_data_buf bufs[3] = { { x, 5 }, { y, 1 }, { z, 6 } };
	memset(dst, 0, LEN);
	ibv_wr_start(qx);
	qx->wr_id = 5;
	ibv_wr_rdma_write(qx, mr_dst->rkey, (uintptr_t)dst + 100);
	ibv_wr_set_inline_data_list(qx, 3, bufs);
	CHECK_EQ(ibv_wr_complete(qx), 0, "ibv_wr_set_inline_data_list");
	expect(cq_a, 5, UINT32_MAX, "ibv_wr_rdma_write + inline list");
	CHECK(memcmp(dst + 100, "hello-world!", 12) == 0, "the list's bytes, in order");

	/* Over the limit through the list: ENOMEM at ibv_wr_complete, nothing posted. */
	struct ibv_data_buf big[2] = { { src, max_inline }, { src, 1 } };
	ibv_wr_start(qx);
	qx->wr_id = 6;
	ibv_wr_rdma_write(qx, mr_dst->rkey, (uintptr_t)dst);
	ibv_wr_set_inline_data_list(qx, 2, big);
	CHECK_EQ(ibv_wr_complete(qx), ENOMEM, "inline list over max_inline_data");
	CHECK_EQ(ibv_poll_cq(cq_a, 1, &wc), 0, "nothing completes after ENOMEM");

	/* Zero bytes inline: an empty message. */
	post_recv_b();
	ibv_wr_start(qx);
	qx->wr_id = 7;
	ibv_wr_send(qx);
	ibv_wr_set_inline_data(qx, NULL, 0);
	CHECK_EQ(ibv_wr_complete(qx), 0, "zero bytes inline");
	expect(cq_a, 7, UINT32_MAX, "an empty inline SEND");
	expect(cq_b, 9, 0, "its receive");

	/* Two-block WQEs (ctrl, raddr, 4 + 60 bytes) round the ring many times. */
	for (int i = 0; i < 40; i++) {
		pattern(src, 60, (uint8_t)(i * 13));
		ibv_wr_start(qx);
		qx->wr_id = 100 + i;
		ibv_wr_rdma_write(qx, mr_dst->rkey, (uintptr_t)dst + 4 * (i % 8));
		ibv_wr_set_inline_data(qx, src, 60);
		CHECK_EQ(ibv_wr_complete(qx), 0, "a two-block inline WRITE");
		expect(cq_a, 100 + i, UINT32_MAX, "a two-block inline WRITE");
		CHECK(memcmp(dst + 4 * (i % 8), src, 60) == 0, "the bytes of two-block inline WRITE %d", i);
	}
	printf("inline data: ibv_post_send and ibv_wr_set_inline_data(_list) copy the bytes; ENOMEM past %u\n",
	       max_inline);
	return 0;
}
