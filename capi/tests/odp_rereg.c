/* ibv_rereg_mr of ODP MRs (docs/behaviour.md items 332-334): rights and PD changed in place
 * with the keys kept; a new translation to pages that cannot be pinned (PROT_NONE until after
 * the rereg) made a new ODP MR with new keys, reached through the new rkey once the pages are
 * writable, the old rkey refused; EOPNOTSUPP for dropping ON_DEMAND in place, EACCES for write
 * rights on an MR registered without them; an implicit MR made anew on a PD change. */
#include <sys/mman.h>
#include <unistd.h>
#include "common.h"

enum { LEN = 4 * 4096 };

static struct ibv_wc expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, const char *what)
{
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.status == status, "%s: status %s, expected %s", what, ibv_wc_status_str(wc.status),
	      ibv_wc_status_str(status));
	CHECK_EQ(wc.wr_id, wr_id, what);
	return wc;
}

static void write_to(struct ibv_qp *qp, uint64_t id, struct ibv_sge *sge, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send");
}

/* ibv_rereg_mr that the kernel refuses: IBV_REREG_MR_ERR_CMD with `errno_want`. */
static void refused(struct ibv_mr *mr, int flags, struct ibv_pd *pd, int access, int errno_want, const char *what)
{
	uint32_t lkey = mr->lkey;
	errno = 0;
	CHECK_EQ(ibv_rereg_mr(mr, flags, pd, NULL, 0, access), IBV_REREG_MR_ERR_CMD, what);
	CHECK_EQ(errno, errno_want, what);
	CHECK_EQ(mr->lkey, lkey, "the MR's lkey after a refused rereg");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_device_attr_ex attr;
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &attr), 0, "ibv_query_device_ex");
	uint32_t need = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
	if (!(attr.odp_caps.general_caps & IBV_ODP_SUPPORT) ||
	    (attr.odp_caps.per_transport_caps.rc_odp_caps & need) != need)
		SKIP("the device has no ODP for RC");
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	struct ibv_cq *cq_a = ibv_create_cq(ctx, 64, NULL, NULL, 0), *cq_b = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && pd2 && cq_a && cq_b, "pds, cqs");
	struct ibv_qp *a = rc_qp(ctx, pd, cq_a, 0), *b = rc_qp(ctx, pd, cq_b, 0);
	CHECK(a && b, "ibv_create_qp_ex: %s", strerror(errno));
	connect_qp(ctx, a, b);
	connect_qp(ctx, b, a);
	static uint8_t src[4096];
	for (int i = 0; i < 4096; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	struct ibv_mr *smr = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	CHECK(smr, "ibv_reg_mr of the source");
	uint8_t *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED, "mmap");
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND;
	struct ibv_mr *mr = ibv_reg_mr(pd, p, 4096, rw);
	CHECK(mr, "ibv_reg_mr(ON_DEMAND): %s", strerror(errno));
	uint32_t lkey = mr->lkey, rkey = mr->rkey;

	/* Rights and PD in place: the keys stay. */
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, rw | IBV_ACCESS_REMOTE_ATOMIC), 0,
		 "rereg of the rights");
	CHECK(mr->lkey == lkey && mr->rkey == rkey, "the keys after a rights change");
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0, "rereg of the PD");
	CHECK(mr->lkey == lkey && mr->rkey == rkey && mr->pd == pd2, "the keys and PD after a PD change");
	CHECK_EQ(ibv_dealloc_pd(pd2), EBUSY, "ibv_dealloc_pd of the MR's new PD");
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0), 0, "rereg back to the QPs' PD");
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 100, .lkey = smr->lkey };
	write_to(a, 1, &sge, (uintptr_t)p + 8, mr->rkey);
	expect_wc(cq_a, 1, IBV_WC_SUCCESS, "a WRITE through the rkey kept");
	CHECK(memcmp(p + 8, src, 100) == 0, "the WRITE's bytes");

	/* A new translation over pages no one may touch yet: nothing is pinned, so the rereg
	 * succeeds; a new MR with new keys. */
	uint8_t *q = mmap(NULL, 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(q != MAP_FAILED, "mmap");
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, q, 2 * 4096, 0), 0,
		 "rereg to PROT_NONE pages");
	CHECK(mr->addr == q && mr->length == 2 * 4096, "the MR's new range");
	CHECK(mr->lkey != lkey && mr->rkey != rkey && mr->lkey == mr->rkey, "new keys: 0x%x for 0x%x", mr->lkey, lkey);
	CHECK_EQ(mprotect(q, 2 * 4096, PROT_READ | PROT_WRITE), 0, "mprotect");
	sge.length = 300;
	write_to(a, 2, &sge, (uintptr_t)q + 4000, mr->rkey);
	expect_wc(cq_a, 2, IBV_WC_SUCCESS, "a WRITE through the new rkey, faulting the pages in");
	CHECK(memcmp(q + 4000, src, 300) == 0, "the WRITE's bytes in the new range");

	/* The driver's refusals. */
	refused(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, IBV_ACCESS_LOCAL_WRITE, EOPNOTSUPP, "dropping ON_DEMAND in place");
	struct ibv_mr *ro = ibv_reg_mr(pd, p + 8192, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND);
	CHECK(ro, "a read-only ODP MR");
	refused(ro, IBV_REREG_MR_CHANGE_ACCESS, NULL, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND, EACCES,
		"write rights on a read-only ODP MR");
	CHECK_EQ(ibv_dereg_mr(ro), 0, "ibv_dereg_mr");
	errno = 0;
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 4096, 0), IBV_REREG_MR_ERR_INPUT,
		 "a new translation without an address (libibverbs)");
	CHECK_EQ(errno, EINVAL, "its errno");

	/* An implicit MR: a PD change makes a new one, with new keys. */
	if (attr.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) {
		struct ibv_mr *imr = ibv_reg_mr(pd2, NULL, SIZE_MAX, rw);
		CHECK(imr, "an implicit ODP MR: %s", strerror(errno));
		uint32_t ikey = imr->lkey;
		refused(imr, IBV_REREG_MR_CHANGE_ACCESS, NULL, IBV_ACCESS_LOCAL_WRITE, EOPNOTSUPP,
			"an implicit MR without ON_DEMAND");
		CHECK_EQ(ibv_rereg_mr(imr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0), 0, "rereg of an implicit MR's PD");
		CHECK(imr->lkey != ikey && imr->addr == NULL && imr->length == SIZE_MAX, "a new implicit MR");
		write_to(a, 3, &sge, (uintptr_t)p + 12288, imr->rkey);
		expect_wc(cq_a, 3, IBV_WC_SUCCESS, "a WRITE through the new implicit MR");
		CHECK(memcmp(p + 12288, src, 300) == 0, "its bytes");
		CHECK_EQ(ibv_dereg_mr(imr), 0, "ibv_dereg_mr of the implicit MR");
	}

	/* The old rkey reaches nothing. */
	write_to(a, 4, &sge, (uintptr_t)p, rkey);
	expect_wc(cq_a, 4, IBV_WC_REM_ACCESS_ERR, "a WRITE through the rkey before the new translation");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_dealloc_pd(pd2), 0, "ibv_dealloc_pd of the second PD, unused now");
	printf("ODP rereg: rights and PD kept the keys; a new translation over PROT_NONE pages made new keys and "
	       "faulted the pages in on a WRITE; EOPNOTSUPP, EACCES and EINVAL as the kernel and libibverbs answer; "
	       "an implicit MR made anew\n");
	return 0;
}
