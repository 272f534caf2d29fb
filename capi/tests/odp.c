/* On-demand paging: odp_caps, ODP MRs over pages first touched after registration, an
 * implicit ODP MR, ibv_advise_mr's checks, and accesses to unmapped pages of an ODP MR
 * ending in error completions (not a crash). */
#include <sys/mman.h>
#include <unistd.h>
#include "common.h"

enum { PAGES = 4, LEN = PAGES * 4096 };

static struct ibv_wc expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, const char *what)
{
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.status == status, "%s: status %s (vendor_err %#x), expected %s", what, ibv_wc_status_str(wc.status),
	      wc.vendor_err, ibv_wc_status_str(status));
	CHECK_EQ(wc.wr_id, wr_id, what);
	return wc;
}

static uint8_t *fresh_pages(void)
{
	void *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED, "mmap");
	return p;
}

static void post(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, struct ibv_sge *sge, uint64_t raddr,
		 uint32_t rkey)
{
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device");
	struct ibv_device_attr_ex attr;
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &attr), 0, "ibv_query_device_ex");
	uint32_t rc = attr.odp_caps.per_transport_caps.rc_odp_caps;
	uint32_t need = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
	if (!(attr.odp_caps.general_caps & IBV_ODP_SUPPORT) || (rc & need) != need)
		SKIP("the device has no ODP for RC (general_caps %#llx, rc %#x)",
		     (unsigned long long)attr.odp_caps.general_caps, rc);
	printf("odp_caps: general %#llx rc %#x uc %#x ud %#x xrc %#x\n", (unsigned long long)attr.odp_caps.general_caps,
	       rc, attr.odp_caps.per_transport_caps.uc_odp_caps, attr.odp_caps.per_transport_caps.ud_odp_caps,
	       attr.xrc_odp_caps);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	struct ibv_cq *cq_a = ibv_create_cq(ctx, 64, NULL, NULL, 0), *cq_b = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cq_a && cq_b, "ibv_create_cq");
	struct ibv_qp *a = rc_qp(ctx, pd, cq_a, 0), *b = rc_qp(ctx, pd, cq_b, 0);
	CHECK(a && b, "ibv_create_qp_ex: %s", strerror(errno));
	connect_qp(ctx, a, b);
	connect_qp(ctx, b, a);

	/* Explicit ODP MRs over pages nobody touched yet; the source is written afterwards. */
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND;
	uint8_t *src = fresh_pages(), *dst = fresh_pages();
	struct ibv_mr *ms = ibv_reg_mr(pd, src, LEN, rw), *md = ibv_reg_mr(pd, dst, LEN, rw);
	CHECK(ms && md, "ibv_reg_mr(ON_DEMAND): %s", strerror(errno));
	for (int i = 0; i < LEN; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = LEN, .lkey = ms->lkey };
	post(a, 1, IBV_WR_RDMA_WRITE, &sge, (uintptr_t)dst, md->rkey);
	expect_wc(cq_a, 1, IBV_WC_SUCCESS, "RDMA WRITE between ODP MRs");
	CHECK(memcmp(src, dst, LEN) == 0, "RDMA WRITE placed the bytes in pages faulted in at access");
	memset(src, 0, LEN);
	post(a, 2, IBV_WR_RDMA_READ, &sge, (uintptr_t)dst, md->rkey);
	expect_wc(cq_a, 2, IBV_WC_SUCCESS, "RDMA READ between ODP MRs");
	CHECK(memcmp(src, dst, LEN) == 0, "RDMA READ brought the bytes back");
	printf("explicit ODP: RDMA WRITE and READ of %d bytes over pages touched after registration\n", LEN);

	/* An implicit ODP MR: any address of the process, here malloc'd memory. */
	if (attr.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) {
		struct ibv_mr *imr = ibv_reg_mr(pd, NULL, SIZE_MAX, rw);
		CHECK(imr, "ibv_reg_mr(NULL, SIZE_MAX, ON_DEMAND): %s", strerror(errno));
		char *msg = malloc(64), *in = calloc(1, 64);
		CHECK(msg && in, "malloc");
		snprintf(msg, 64, "through the implicit ODP MR");
		struct ibv_sge rs = { .addr = (uintptr_t)in, .length = 64, .lkey = imr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = &rs, .num_sge = 1 }, *rbad = NULL;
		CHECK_EQ(ibv_post_recv(b, &rwr, &rbad), 0, "ibv_post_recv");
		struct ibv_sge ss = { .addr = (uintptr_t)msg, .length = 64, .lkey = imr->lkey };
		post(a, 4, IBV_WR_SEND, &ss, 0, 0);
		expect_wc(cq_a, 4, IBV_WC_SUCCESS, "SEND from the implicit MR");
		expect_wc(cq_b, 3, IBV_WC_SUCCESS, "receive into the implicit MR");
		CHECK(strcmp(in, msg) == 0, "the message arrived: '%s'", in);
		printf("implicit ODP: SEND and receive through lkey %#x: '%s'\n", imr->lkey, in);
		CHECK_EQ(ibv_dereg_mr(imr), 0, "ibv_dereg_mr(implicit)");
		free(msg);
		free(in);
	}

	/* ibv_advise_mr: a prefetch that works, then each check. */
	struct ibv_sge pf = { .addr = (uintptr_t)dst, .length = LEN, .lkey = md->lkey };
	int adv_w = IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, flush = IBV_ADVISE_MR_FLAG_FLUSH;
	CHECK_EQ(ibv_advise_mr(pd, adv_w, flush, &pf, 1), 0, "advise_mr PREFETCH_WRITE, FLUSH");
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &pf, 1), 0, "advise_mr PREFETCH");
	CHECK_EQ(ibv_advise_mr(pd, adv_w, flush, &pf, 0), EINVAL, "advise_mr with no SGE");
	CHECK_EQ(ibv_advise_mr(pd, adv_w, 2, &pf, 1), EINVAL, "advise_mr with an unknown flag");
	CHECK_EQ(ibv_advise_mr(pd, 7, flush, &pf, 1), EOPNOTSUPP, "advise_mr with an unknown advice");
	struct ibv_sge bad_key = { .addr = (uintptr_t)dst, .length = 8, .lkey = md->lkey ^ 0x100 };
	CHECK_EQ(ibv_advise_mr(pd, adv_w, flush, &bad_key, 1), ENOENT, "advise_mr FLUSH with a bad lkey");
	CHECK_EQ(ibv_advise_mr(pd, adv_w, 0, &bad_key, 1), EINVAL, "advise_mr with a bad lkey");
	struct ibv_sge past = { .addr = (uintptr_t)dst + LEN, .length = 8, .lkey = md->lkey };
	CHECK_EQ(ibv_advise_mr(pd, adv_w, flush, &past, 1), EFAULT, "advise_mr FLUSH past the MR");
	printf("advise_mr: 0, then EINVAL, EINVAL, EOPNOTSUPP, ENOENT, EINVAL, EFAULT as the kernel answers\n");

	/* A read-only mapping under a writable ODP MR: it faults in for reading, not for writing. */
	uint8_t *ro = fresh_pages();
	CHECK_EQ(mprotect(ro, LEN, PROT_READ), 0, "mprotect");
	struct ibv_mr *mro = ibv_reg_mr(pd, ro, LEN, rw);
	CHECK(mro, "ibv_reg_mr(ON_DEMAND) over read-only pages: %s", strerror(errno));
	struct ibv_sge rsg = { .addr = (uintptr_t)ro, .length = LEN, .lkey = mro->lkey };
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, &rsg, 1), 0, "PREFETCH of read-only pages");
	CHECK_EQ(ibv_advise_mr(pd, adv_w, flush, &rsg, 1), EFAULT, "PREFETCH_WRITE of read-only pages");
	CHECK_EQ(ibv_dereg_mr(mro), 0, "ibv_dereg_mr(read-only)");
	printf("read-only pages: PREFETCH 0, PREFETCH_WRITE EFAULT\n");

	/* Unmapped pages of an ODP MR: the fault fails, the WQE completes in error. */
	CHECK_EQ(munmap(src + 4096, 4096), 0, "munmap");
	struct ibv_sge hole = { .addr = (uintptr_t)src + 4096, .length = 4096, .lkey = ms->lkey };
	CHECK_EQ(ibv_advise_mr(pd, adv_w, flush, &hole, 1), EFAULT, "advise_mr FLUSH over an unmapped page");
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, flush, &hole, 1), 0,
		 "advise_mr PREFETCH_NO_FAULT over an unmapped page");
	post(a, 5, IBV_WR_RDMA_WRITE, &hole, (uintptr_t)dst, md->rkey);
	struct ibv_wc wc = expect_wc(cq_a, 5, IBV_WC_LOC_PROT_ERR, "RDMA WRITE from an unmapped ODP page");
	printf("gather from an unmapped ODP page: %s (vendor_err %#x)\n", ibv_wc_status_str(wc.status), wc.vendor_err);

	/* The same hole as an RDMA WRITE target, on a fresh pair: the responder's fault is a NAK. */
	struct ibv_qp *c = rc_qp(ctx, pd, cq_a, 0), *d = rc_qp(ctx, pd, cq_b, 0);
	CHECK(c && d, "ibv_create_qp_ex");
	connect_qp(ctx, c, d);
	connect_qp(ctx, d, c);
	struct ibv_sge from = { .addr = (uintptr_t)dst, .length = 4096, .lkey = md->lkey };
	post(c, 6, IBV_WR_RDMA_WRITE, &from, (uintptr_t)src + 4096, ms->rkey);
	wc = expect_wc(cq_a, 6, IBV_WC_REM_ACCESS_ERR, "RDMA WRITE to an unmapped ODP page");
	printf("RDMA WRITE to an unmapped ODP page: %s (vendor_err %#x)\n", ibv_wc_status_str(wc.status), wc.vendor_err);

	CHECK_EQ(ibv_destroy_qp(a), 0, "destroy a");
	CHECK_EQ(ibv_destroy_qp(b), 0, "destroy b");
	CHECK_EQ(ibv_destroy_qp(c), 0, "destroy c");
	CHECK_EQ(ibv_destroy_qp(d), 0, "destroy d");
	CHECK_EQ(ibv_dereg_mr(ms), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_dereg_mr(md), 0, "ibv_dereg_mr");
	ibv_destroy_cq(cq_a);
	ibv_destroy_cq(cq_b);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("odp: ok\n");
	return 0;
}
