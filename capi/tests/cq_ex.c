/* Extended CQs: ibv_create_cq_ex and mlx5dv_create_cq with several wc_flags, libmlx5's errno
 * for bad attributes, and RC loopback traffic polled with ibv_start_poll / ibv_next_poll /
 * ibv_end_poll, every ibv_wc_read_* checked against what was sent; completion timestamps
 * (present, non-decreasing on one CQ, between ibv_query_rt_values_ex readings taken before
 * and after; converted to wall-clock time with mlx5dv_get_clock_info as libmlx5 converts
 * them for ibv_wc_read_completion_wallclock_ns); then the same CQ through ibv_poll_cq, a completion channel, mlx5dv_init_obj and
 * ibv_destroy_cq. */
#include <poll.h>
#include "common.h"

enum { LEN = 4096 };

static struct ibv_context *ctx;

static void expect_fail(struct ibv_cq_init_attr_ex a, struct mlx5dv_cq_init_attr *dv, int err, const char *what)
{
	errno = 0;
	struct ibv_cq_ex *cq = dv ? mlx5dv_create_cq(ctx, &a, dv) : ibv_create_cq_ex(ctx, &a);
	CHECK(!cq, "%s: created", what);
	CHECK_EQ(errno, err, what);
}

/* The next completion of cq, polled into its current slot (start or next), or FAIL. */
static void poll_ex(struct ibv_cq_ex *cq, int first)
{
	for (long i = 0; i < 100000000L; i++) {
		struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
		int r = first ? ibv_start_poll(cq, &pa) : ibv_next_poll(cq);
		if (r == 0)
			return;
		CHECK_EQ(r, ENOENT, first ? "ibv_start_poll" : "ibv_next_poll");
	}
	FAIL("no completion");
}

/* The device clock, read with ibv_query_rt_values_ex (libmlx5: tv_sec 0, the raw cycles in
 * tv_nsec). */
static uint64_t raw_clock(void)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	CHECK_EQ(ibv_query_rt_values_ex(ctx, &v), 0, "ibv_query_rt_values_ex");
	CHECK_EQ(v.comp_mask, IBV_VALUES_MASK_RAW_CLOCK, "RAW_CLOCK answered");
	CHECK_EQ(v.raw_clock.tv_sec, 0, "raw_clock.tv_sec");
	return (uint64_t)v.raw_clock.tv_nsec;
}

/* A completion's timestamp: present, within [*prev, after] and the mask. */
static void check_ts(struct ibv_cq_ex *cq, uint64_t *prev, uint64_t mask, const char *what)
{
	uint64_t ts = ibv_wc_read_completion_ts(cq);
	CHECK(ts != 0 && ts >= *prev && (ts & ~mask) == 0, "%s: timestamp %llu after %llu (mask 0x%llx)", what,
	      (unsigned long long)ts, (unsigned long long)*prev, (unsigned long long)mask);
	*prev = ts;
}

static uint64_t realtime_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The wall-clock time of a completion, read and converted, within [lo, hi] give or take
 * 10 ms (the conversion's rounding, and the page read after the completion). */
static void check_wallclock(struct ibv_cq_ex *cq, uint64_t lo, uint64_t hi)
{
	const uint64_t slack = 10000000;
	uint64_t wall = ibv_wc_read_completion_wallclock_ns(cq);
	struct mlx5dv_clock_info ci;
	CHECK_EQ(mlx5dv_get_clock_info(ctx, &ci), 0, "mlx5dv_get_clock_info");
	uint64_t conv = mlx5dv_ts_to_ns(&ci, ibv_wc_read_completion_ts(cq));
	CHECK(wall + slack >= lo && wall <= hi + slack, "wall-clock completion %llu within [%llu, %llu]",
	      (unsigned long long)wall, (unsigned long long)lo, (unsigned long long)hi);
	CHECK(conv + slack >= wall && conv <= wall + slack, "mlx5dv_ts_to_ns %llu near the read %llu",
	      (unsigned long long)conv, (unsigned long long)wall);
}

static void expect_empty(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	CHECK_EQ(ibv_start_poll(cq, &pa), ENOENT, "ibv_start_poll on an empty CQ");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	struct ibv_device_attr_ex dattr;
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &dattr), 0, "ibv_query_device_ex");

	/* Bad attributes, each with libmlx5's errno (providers/mlx5/verbs.c, create_cq). */
	struct ibv_cq_init_attr_ex good = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_cq_init_attr_ex a = good;
	a.cqe = 0;
	expect_fail(a, NULL, EINVAL, "cqe 0");
	a = good;
	a.comp_mask = 1 << 7;
	expect_fail(a, NULL, EINVAL, "an unknown comp_mask bit");
	a = good;
	a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	a.flags = 1 << 9;
	expect_fail(a, NULL, EINVAL, "an unknown creation flag");
	a = good;
	a.wc_flags = 1ull << 30;
	expect_fail(a, NULL, EOPNOTSUPP, "an unknown wc_flags bit");
	a = good;
	a.cqe = dattr.orig_attr.max_cqe + 1;
	expect_fail(a, NULL, EINVAL, "cqe past max_cqe");
	a = good;
	a.comp_vector = ctx->num_comp_vectors;
	expect_fail(a, NULL, EINVAL, "comp_vector past num_comp_vectors");
	/* The clock: mlx5_ib's mask, the profile's frequency (kHz). */
	CHECK_EQ(dattr.completion_timestamp_mask, 0x7fffffffffffffffull, "completion_timestamp_mask");
	CHECK(dattr.hca_core_clock != 0, "hca_core_clock");
	struct ibv_values_ex badv = { .comp_mask = 1 << 1 };
	CHECK_EQ(ibv_query_rt_values_ex(ctx, &badv), EINVAL, "ibv_query_rt_values_ex: an unknown comp_mask bit");
	struct ibv_values_ex none = { .comp_mask = 0 };
	CHECK_EQ(ibv_query_rt_values_ex(ctx, &none), 0, "ibv_query_rt_values_ex asking nothing");
	CHECK_EQ(none.comp_mask, 0, "nothing answered");
	uint64_t r0 = realtime_ns(), c0 = raw_clock();
	struct mlx5dv_context dvc = { .comp_mask = MLX5DV_CONTEXT_MASK_CQE_COMPRESION |
						   MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE };
	CHECK_EQ(mlx5dv_query_device(ctx, &dvc), 0, "mlx5dv_query_device");
	CHECK(dvc.comp_mask & MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE && dvc.max_clock_info_update_nsec > 1000000000ull,
	      "a clock-info page updated at least every second");
	struct mlx5dv_cq_init_attr dv = { .comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, .cqe_size = 100 };
	expect_fail(good, &dv, EINVAL, "cqe_size 100");
	dv = (struct mlx5dv_cq_init_attr){ .comp_mask = 1 << 6 };
	expect_fail(good, &dv, EINVAL, "an unknown vendor comp_mask bit");
	dv = (struct mlx5dv_cq_init_attr){ .comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_FLAGS, .flags = 1 << 1 };
	expect_fail(good, &dv, EINVAL, "a reserved vendor flag");
	if (!(dvc.flags & MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD)) {
		dv = (struct mlx5dv_cq_init_attr){ .comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_FLAGS |
							       MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE,
						   .flags = MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD, .cqe_size = 128 };
		expect_fail(good, &dv, EINVAL, "CQE padding on a device without it");
	} else {
		/* Padding is for 128-byte CQEs only (libmlx5's create_cq: EINVAL otherwise). */
		dv = (struct mlx5dv_cq_init_attr){ .comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_FLAGS |
							       MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE,
						   .flags = MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD, .cqe_size = 64 };
		expect_fail(good, &dv, EINVAL, "CQE padding with 64-byte CQEs");
		dv.cqe_size = 128;
		struct ibv_cq_ex *padded = mlx5dv_create_cq(ctx, &good, &dv);
		CHECK(padded, "a padded 128-byte CQ: %s", strerror(errno));
		CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(padded)), 0, "destroy the padded CQ");
		printf("CQE_128B_PAD advertised: padding needs 128-byte CQEs (64: EINVAL)\n");
	}
	if (!dvc.cqe_comp_caps.max_num) {
		dv = (struct mlx5dv_cq_init_attr){ .comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE,
						   .cqe_comp_res_format = MLX5DV_CQE_RES_FORMAT_HASH };
		expect_fail(good, &dv, EINVAL, "CQE compression on a device without it");
	} else {
		/* One offered format makes a CQ; two at once are the kernel's EINVAL. */
		dv = (struct mlx5dv_cq_init_attr){ .comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE,
						   .cqe_comp_res_format = MLX5DV_CQE_RES_FORMAT_HASH };
		struct ibv_cq_ex *zipped = mlx5dv_create_cq(ctx, &good, &dv);
		CHECK(zipped, "a CQ compressed with the hash format: %s", strerror(errno));
		CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(zipped)), 0, "destroy the compressed CQ");
		dv.cqe_comp_res_format = MLX5DV_CQE_RES_FORMAT_HASH | MLX5DV_CQE_RES_FORMAT_CSUM;
		expect_fail(good, &dv, EINVAL, "CQE compression in two formats");
		printf("CQE compression: max_num %u, formats 0x%x; two formats at once EINVAL\n",
		       dvc.cqe_comp_caps.max_num, dvc.cqe_comp_caps.supported_format);
	}

	/* The CQs: the sender's with every standard field; the receiver's through mlx5dv with
	 * 128-byte CQEs, a channel, a context and some fields; a third with none. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "ibv_create_comp_channel");
	struct ibv_cq_init_attr_ex sa = { .cqe = 64,
					  .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
						      IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					  .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED };
	struct ibv_cq_ex *scq = ibv_create_cq_ex(ctx, &sa);
	CHECK(scq, "ibv_create_cq_ex: %s", strerror(errno));
	CHECK(scq->read_byte_len && scq->read_imm_data && scq->read_qp_num && scq->read_src_qp &&
	      scq->read_slid && scq->read_sl && scq->read_dlid_path_bits, "standard read ops set");
	CHECK(scq->read_completion_ts && scq->read_completion_wallclock_ns, "timestamp read ops set");
	CHECK(!scq->read_cvlan && !scq->read_flow_tag, "unasked read ops unset");
	CHECK(ibv_cq_ex_to_cq(scq)->cqe >= 64, "cqe rounded up");
	struct ibv_cq_init_attr_ex ra = { .cqe = 32, .cq_context = (void *)0xc0ffee, .channel = ch,
					  .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
						      IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_QP_NUM |
						      IBV_WC_EX_WITH_FLOW_TAG | IBV_WC_EX_WITH_CVLAN |
						      IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	dv = (struct mlx5dv_cq_init_attr){ .comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, .cqe_size = 128 };
	struct ibv_cq_ex *rcq = mlx5dv_create_cq(ctx, &ra, &dv);
	CHECK(rcq, "mlx5dv_create_cq: %s", strerror(errno));
	CHECK(rcq->read_byte_len && rcq->read_imm_data && !rcq->read_slid && !rcq->read_sl &&
	      !rcq->read_completion_wallclock_ns, "asked read ops only");
	CHECK(ibv_cq_ex_to_cq(rcq)->channel == ch && ibv_cq_ex_to_cq(rcq)->cq_context == (void *)0xc0ffee,
	      "channel and cq_context");
	struct ibv_cq_init_attr_ex na = { .cqe = 4, .wc_flags = 0 };
	struct ibv_cq_ex *ncq = ibv_create_cq_ex(ctx, &na);
	CHECK(ncq, "ibv_create_cq_ex without fields: %s", strerror(errno));
	CHECK(ncq->start_poll && ncq->read_opcode && ncq->read_wc_flags && ncq->read_vendor_err &&
	      !ncq->read_byte_len && !ncq->read_qp_num && !ncq->read_completion_ts, "only the always-set ops");
	expect_empty(ncq);

	struct mlx5dv_cq dcq;
	struct mlx5dv_obj obj = { .cq = { .in = ibv_cq_ex_to_cq(rcq), .out = &dcq } };
	CHECK_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ), 0, "mlx5dv_init_obj(CQ) of an extended CQ");
	CHECK(dcq.buf && dcq.dbrec && dcq.cqe_cnt >= 32, "its ring");

	struct ibv_qp *qa = rc_qp(ctx, pd, ibv_cq_ex_to_cq(scq), 0);
	struct ibv_qp_init_attr_ex qb_attr = {
		.send_cq = ibv_cq_ex_to_cq(scq), .recv_cq = ibv_cq_ex_to_cq(rcq), .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};
	struct ibv_qp *qb = ibv_create_qp_ex(ctx, &qb_attr);
	CHECK(qa && qb, "create QPs: %s", strerror(errno));
	connect_qp(ctx, qa, qb);
	connect_qp(ctx, qb, qa);

	uint8_t *src = malloc(LEN), *dst = malloc(LEN);
	CHECK(src && dst, "malloc");
	for (int i = 0; i < LEN; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	memset(dst, 0, LEN);
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *ms = ibv_reg_mr(pd, src, LEN, rw), *md = ibv_reg_mr(pd, dst, LEN, rw);
	CHECK(ms && md, "ibv_reg_mr");

	expect_empty(scq);
	expect_empty(rcq);

	/* Three receives; a SEND with immediate, a SEND, an RDMA WRITE with immediate. */
	for (int i = 0; i < 3; i++) {
		struct ibv_sge r = { .addr = (uintptr_t)dst + i * 1024, .length = 1024, .lkey = md->lkey };
		struct ibv_recv_wr w = { .wr_id = 100 + i, .sg_list = &r, .num_sge = 1 }, *bad;
		CHECK_EQ(ibv_post_recv(qb, &w, &bad), 0, "ibv_post_recv");
	}
	CHECK_EQ(ibv_req_notify_cq(ibv_cq_ex_to_cq(rcq), 0), 0, "ibv_req_notify_cq on an extended CQ");
	struct ibv_sge s1 = { .addr = (uintptr_t)src, .length = 300, .lkey = ms->lkey };
	struct ibv_sge s2 = { .addr = (uintptr_t)src + 300, .length = 77, .lkey = ms->lkey };
	struct ibv_sge s3 = { .addr = (uintptr_t)src + 500, .length = 512, .lkey = ms->lkey };
	struct ibv_send_wr w3 = { .wr_id = 3, .sg_list = &s3, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(0x33334444) };
	w3.wr.rdma.remote_addr = (uintptr_t)dst + 3072;
	w3.wr.rdma.rkey = md->rkey;
	struct ibv_send_wr w2 = { .wr_id = 2, .next = &w3, .sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr w1 = { .wr_id = 1, .next = &w2, .sg_list = &s1, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(0x11112222) }, *bad;
	CHECK_EQ(ibv_post_send(qa, &w1, &bad), 0, "ibv_post_send");

	/* The sender's three completions in one start/next/end pass. */
	static const struct { uint64_t wr_id; enum ibv_wc_opcode op; } sent[] = {
		{ 1, IBV_WC_SEND }, { 2, IBV_WC_SEND }, { 3, IBV_WC_RDMA_WRITE } };
	uint64_t mask = dattr.completion_timestamp_mask, sprev = c0, rprev = c0;
	for (int i = 0; i < 3; i++) {
		poll_ex(scq, i == 0);
		CHECK_EQ(scq->status, IBV_WC_SUCCESS, "send status");
		CHECK_EQ(scq->wr_id, sent[i].wr_id, "send wr_id");
		CHECK_EQ(ibv_wc_read_opcode(scq), sent[i].op, "send opcode");
		CHECK_EQ(ibv_wc_read_qp_num(scq), qa->qp_num, "send qp_num");
		CHECK_EQ(ibv_wc_read_vendor_err(scq), 0, "send vendor_err");
		CHECK_EQ(ibv_wc_read_wc_flags(scq) & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV), 0, "send wc_flags");
		check_ts(scq, &sprev, mask, "send");
		check_wallclock(scq, r0, realtime_ns());
	}
	CHECK_EQ(ibv_next_poll(scq), ENOENT, "ibv_next_poll past the last");
	ibv_end_poll(scq);

	/* The receiver: its channel fired; the three receives, each field as sent. */
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	CHECK_EQ(poll(&pfd, 1, 1000), 1, "the channel's fd became readable");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0, "ibv_get_cq_event");
	CHECK(ev_cq == ibv_cq_ex_to_cq(rcq) && ev_ctx == (void *)0xc0ffee, "the event names the extended CQ");
	ibv_ack_cq_events(ev_cq, 1);
	static const struct { uint64_t wr_id; enum ibv_wc_opcode op; uint32_t len, imm; int has_imm; } got[] = {
		{ 100, IBV_WC_RECV, 300, 0x11112222, 1 },
		{ 101, IBV_WC_RECV, 77, 0, 0 },
		{ 102, IBV_WC_RECV_RDMA_WITH_IMM, 512, 0x33334444, 1 } };
	for (int i = 0; i < 3; i++) {
		poll_ex(rcq, i == 0);
		CHECK_EQ(rcq->status, IBV_WC_SUCCESS, "receive status");
		CHECK_EQ(rcq->wr_id, got[i].wr_id, "receive wr_id");
		CHECK_EQ(ibv_wc_read_opcode(rcq), got[i].op, "receive opcode");
		CHECK_EQ(ibv_wc_read_byte_len(rcq), got[i].len, "receive byte_len");
		CHECK_EQ(ibv_wc_read_qp_num(rcq), qb->qp_num, "receive qp_num");
		CHECK_EQ(ibv_wc_read_src_qp(rcq), qa->qp_num, "receive src_qp");
		CHECK_EQ(ibv_wc_read_flow_tag(rcq), 0, "receive flow tag");
		CHECK_EQ(ibv_wc_read_cvlan(rcq), 0, "receive cvlan");
		unsigned flags = ibv_wc_read_wc_flags(rcq);
		CHECK_EQ(!!(flags & IBV_WC_WITH_IMM), got[i].has_imm, "receive IBV_WC_WITH_IMM");
		if (got[i].has_imm)
			CHECK_EQ(ntohl(ibv_wc_read_imm_data(rcq)), got[i].imm, "receive immediate");
		check_ts(rcq, &rprev, mask, "receive");
	}
	ibv_end_poll(rcq);
	uint64_t c1 = raw_clock();
	CHECK(sprev <= c1 && rprev <= c1, "timestamps %llu and %llu before the clock read after, %llu",
	      (unsigned long long)sprev, (unsigned long long)rprev, (unsigned long long)c1);
	CHECK(memcmp(dst, src, 300) == 0 && memcmp(dst + 1024, src + 300, 77) == 0 &&
	      memcmp(dst + 3072, src + 500, 512) == 0, "the bytes arrived");

	/* The same CQ through ibv_poll_cq: the same completion as the reads give. */
	struct ibv_sge r = { .addr = (uintptr_t)dst, .length = 1024, .lkey = md->lkey };
	struct ibv_recv_wr rw1 = { .wr_id = 200, .sg_list = &r, .num_sge = 1 }, *rbad;
	CHECK_EQ(ibv_post_recv(qb, &rw1, &rbad), 0, "ibv_post_recv");
	w1.next = NULL;
	w1.wr_id = 9;
	CHECK_EQ(ibv_post_send(qa, &w1, &bad), 0, "ibv_post_send");
	struct ibv_wc wc = poll_one(ibv_cq_ex_to_cq(scq));
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 9 && wc.opcode == IBV_WC_SEND, "ibv_poll_cq of cq_ex");
	wc = poll_one(ibv_cq_ex_to_cq(rcq));
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 200 && wc.byte_len == 300 && wc.src_qp == qa->qp_num &&
	      ntohl(wc.imm_data) == 0x11112222, "ibv_poll_cq of the receiver's cq_ex");
	expect_empty(scq);

	/* An error completion: a bad rkey. */
	struct ibv_send_wr we = { .wr_id = 7, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };
	we.wr.rdma.remote_addr = (uintptr_t)dst;
	we.wr.rdma.rkey = md->rkey ^ 0x100;
	CHECK_EQ(ibv_post_send(qa, &we, &bad), 0, "ibv_post_send(bad rkey)");
	poll_ex(scq, 1);
	CHECK_EQ(scq->status, IBV_WC_REM_ACCESS_ERR, "bad rkey status");
	CHECK_EQ(scq->wr_id, 7, "bad rkey wr_id");
	CHECK_EQ(ibv_wc_read_qp_num(scq), qa->qp_num, "bad rkey qp_num");
	ibv_end_poll(scq);

	CHECK_EQ(ibv_destroy_qp(qa), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(qb), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_dereg_mr(ms), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_dereg_mr(md), 0, "ibv_dereg_mr");
	CHECK(ibv_destroy_comp_channel(ch) != 0, "the channel is busy while its CQ lives");
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(scq)), 0, "ibv_destroy_cq of cq_ex");
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(rcq)), 0, "ibv_destroy_cq of a DV cq_ex");
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(ncq)), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	free(src);
	free(dst);
	printf("PASS\n");
	return 0;
}
