/* A context shared through its command fd: ibv_import_device on a dup of cmd_fd, then
 * ibv_import_pd / ibv_import_mr / ibv_import_dm by handle (the same PD, keys, length, bytes),
 * a QP of the imported context writing into the original's MR through the imported PD, the
 * errno of a bad fd or handle, and the unimports and closes in either order. */
#include "common.h"
#include <fcntl.h>
#include <unistd.h>

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	static char buf[4096], src[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr");

	/* Not a device's fd: EINVAL (libibverbs' S_ISCHR check); a closed one too. */
	int p[2];
	CHECK_EQ(pipe(p), 0, "pipe");
	errno = 0;
	CHECK(!ibv_import_device(p[0]) && errno == EINVAL, "import of a pipe: errno %d", errno);
	errno = 0;
	CHECK(!ibv_import_device(-1) && errno == EINVAL, "import of fd -1: errno %d", errno);
	close(p[0]);
	close(p[1]);

	int fd = dup(ctx->cmd_fd);
	CHECK(fd >= 0, "dup");
	struct ibv_context *imp = ibv_import_device(fd);
	CHECK(imp, "ibv_import_device: errno %d", errno);
	CHECK(imp != ctx && imp->cmd_fd == fd, "a new context on the fd given");

	errno = 0;
	CHECK(!ibv_import_pd(imp, pd->handle + 1000) && errno == ENOENT, "import of no PD: errno %d", errno);
	struct ibv_pd *ipd = ibv_import_pd(imp, pd->handle);
	CHECK(ipd && ipd->context == imp && ipd->handle == pd->handle, "ibv_import_pd");
	errno = 0;
	CHECK(!ibv_import_mr(ipd, mr->handle + 1000) && errno == ENOENT, "import of no MR: errno %d", errno);
	struct ibv_mr *imr = ibv_import_mr(ipd, mr->handle);
	CHECK(imr, "ibv_import_mr: errno %d", errno);
	CHECK(imr->lkey == mr->lkey && imr->rkey == mr->rkey && imr->length == mr->length && !imr->addr &&
		      imr->pd == ipd && imr->context == imp,
	      "the imported MR's keys, length, NULL addr, PD and context");

	/* A QP pair: one on the imported context and PD, one on the original; a WRITE from the
	 * imported side's registered source into the original MR by its rkey. */
	struct ibv_cq *icq = ibv_create_cq(imp, 16, NULL, NULL, 0);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(icq && cq, "ibv_create_cq on both contexts");
	struct ibv_mr *smr = ibv_reg_mr(ipd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	CHECK(smr, "ibv_reg_mr on the imported PD");
	struct ibv_qp *iqp = rc_qp(imp, ipd, icq, 0);
	struct ibv_qp *qp = rc_qp(ctx, pd, cq, 0);
	CHECK(iqp && qp, "QPs on both contexts");
	connect_qp(imp, iqp, qp);
	connect_qp(ctx, qp, iqp);
	memset(src, 0x5a, sizeof(src));
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = sizeof(src), .lkey = smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)buf, .rkey = imr->rkey } };
	struct ibv_send_wr *bad;
	CHECK_EQ(ibv_post_send(iqp, &wr, &bad), 0, "ibv_post_send");
	struct ibv_wc wc = poll_one(icq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, "the WRITE completes: status %d", wc.status);
	CHECK(!memcmp(buf, src, sizeof(buf)), "the bytes landed in the original MR");

	/* Device memory: the imported DM has the original's bytes. */
	struct ibv_device_attr_ex dx;
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &dx), 0, "ibv_query_device_ex");
	if (dx.max_dm_size) {
		struct ibv_alloc_dm_attr a = { .length = 256 };
		struct ibv_dm *dm = ibv_alloc_dm(ctx, &a);
		CHECK(dm, "ibv_alloc_dm");
		errno = 0;
		CHECK(!ibv_import_dm(imp, dm->handle + 1000) && errno == ENOENT, "import of no DM: errno %d", errno);
		struct ibv_dm *idm = ibv_import_dm(imp, dm->handle);
		CHECK(idm && idm->context == imp && idm->handle == dm->handle, "ibv_import_dm: errno %d", errno);
		uint64_t w[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, r[8] = { 0 };
		CHECK_EQ(ibv_memcpy_to_dm(dm, 64, w, sizeof(w)), 0, "copy into the original DM");
		CHECK_EQ(ibv_memcpy_from_dm(r, idm, 64, sizeof(r)), 0, "copy out of the imported DM");
		CHECK(!memcmp(w, r, sizeof(w)), "the imported DM reads the original's bytes");
		ibv_unimport_dm(idm);
		CHECK_EQ(ibv_free_dm(dm), 0, "ibv_free_dm after the unimport");
	}

	/* Unimporting leaves the objects: the original MR still works after it. */
	CHECK_EQ(ibv_destroy_qp(iqp), 0, "destroy the imported context's QP");
	CHECK_EQ(ibv_dereg_mr(smr), 0, "dereg the imported PD's MR");
	CHECK_EQ(ibv_destroy_cq(icq), 0, "destroy the imported context's CQ");
	ibv_unimport_mr(imr);
	ibv_unimport_pd(ipd);
	CHECK_EQ(ibv_close_device(imp), 0, "close the imported context");
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF, "its fd closed with it");
	CHECK_EQ(ibv_destroy_qp(qp), 0, "destroy the original's QP");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "the original MR deregisters");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "the original PD deallocates");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "destroy the original's CQ");
	CHECK_EQ(ibv_close_device(ctx), 0, "close the original context");
	ibv_free_device_list(list);
	printf("import: a context shared through a dup of its command fd, its PD, MR and DM imported\n");
	return 0;
}
