/* Atomics on DC (docs/behaviour.md items 330 and 331).
 *   dc_atomics: in one process, a DCI's compare-and-swaps and fetch-and-adds on a DCT's MR
 *     (original values, the target after), then a misaligned one (REM_INV_REQ_ERR, the DCT
 *     stays in RTR) and one into an MR without REMOTE_ATOMIC (REM_ACCESS_ERR).
 *   dc_atomics server FILE: a DCT whose MR holds the target; writes its number, GID, the
 *     target's address and rkey to FILE, then waits until the target holds the value N_FAA
 *     fetch-and-adds leave, and checks that it stays there (nothing executed twice).
 *   dc_atomics client FILE: a DCI sends a compare-and-swap that misses, one that matches and
 *     N_FAA fetch-and-adds to that target, one at a time (max_rd_atomic 1), and checks every
 *     original value: each request executed once, in order, even when the network loses
 *     requests and answers (capi/tests/two_processes_dc_atomics.sh).
 * On a device without atomics (atomic_cap NONE) a DCI with the atomic send ops is
 * EOPNOTSUPP, as libmlx5 answers. Every wait is bounded; exit 0 on success, 1 on a failure. */
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "dc/dct_file.h"

#define KEY 0x0123456789abcdefULL
#define START 1000ULL
#define SWAP 2000ULL
#define ADD 3ULL
#define N_FAA 40

static uint64_t target[8];
static uint64_t got[64];

static int modify(struct ibv_qp *qp, enum ibv_qp_state to, int mask, union ibv_gid *gid, int access)
{
	struct ibv_qp_attr a = {
		.qp_state = to, .port_num = 1, .path_mtu = IBV_MTU_1024, .min_rnr_timer = 12, .timeout = 12,
		.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1, .qp_access_flags = access,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = *gid, .hop_limit = 64 } },
	};
	return ibv_modify_qp(qp, &a, mask) ? errno : 0;
}

static struct ibv_wc poll_bounded(struct ibv_cq *cq)
{
	struct ibv_wc w;
	time_t end = time(NULL) + 30;
	while (time(NULL) < end) {
		int n = ibv_poll_cq(cq, 1, &w);
		CHECK(n >= 0, "ibv_poll_cq: %d", n);
		if (n == 1)
			return w;
		usleep(100);
	}
	FAIL("no completion in 30 s");
}

static struct ibv_qp_init_attr_ex qp_attr(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_DRIVER, .sq_sig_all = 1,
		.cap = { .max_send_wr = 64, .max_send_sge = 1 }, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};
	return a;
}

static struct ibv_qp *make_dct(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, union ibv_gid *gid,
			       int access)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	CHECK(srq, "ibv_create_srq");
	struct ibv_qp_init_attr_ex a = qp_attr(pd, cq);
	a.srq = srq;
	struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC };
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
	dv.dc_init_attr.dct_access_key = KEY;
	struct ibv_qp *dct = mlx5dv_create_qp(ctx, &a, &dv);
	CHECK(dct, "mlx5dv_create_qp(DCT): %s", strerror(errno));
	int s = IBV_QP_STATE;
	CHECK_EQ(modify(dct, IBV_QPS_INIT, s | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT, gid, access), 0,
		 "DCT to INIT");
	CHECK_EQ(modify(dct, IBV_QPS_RTR, s | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU, gid, access), 0,
		 "DCT to RTR");
	return dct;
}

/* A DCI with the atomic send ops, in RTS; NULL with errno where it cannot be made. */
static struct ibv_qp *make_dci(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, union ibv_gid *gid)
{
	struct ibv_qp_init_attr_ex a = qp_attr(pd, cq);
	a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC };
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	struct ibv_qp *dci = mlx5dv_create_qp(ctx, &a, &dv);
	if (!dci)
		return NULL;
	int s = IBV_QP_STATE;
	CHECK_EQ(modify(dci, IBV_QPS_INIT, s | IBV_QP_PKEY_INDEX | IBV_QP_PORT, gid, 0), 0, "DCI to INIT");
	CHECK_EQ(modify(dci, IBV_QPS_RTR, s | IBV_QP_PATH_MTU | IBV_QP_AV, gid, 0), 0, "DCI to RTR");
	int rts = s | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN;
	CHECK_EQ(modify(dci, IBV_QPS_RTS, rts, gid, 0), 0, "DCI to RTS");
	return dci;
}

/* Post one atomic from `dci` (compare-and-swap when cas) and wait for its completion. */
static struct ibv_wc atomic(struct ibv_qp *dci, struct ibv_ah *ah, unsigned dctn, uint32_t rkey, uint64_t raddr,
			    int cas, uint64_t a, uint64_t b, struct ibv_mr *into, int slot)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(dci);
	struct mlx5dv_qp_ex *mx = mlx5dv_qp_ex_from_ibv_qp_ex(x);
	ibv_wr_start(x);
	x->wr_id = slot;
	if (cas)
		ibv_wr_atomic_cmp_swp(x, rkey, raddr, a, b);
	else
		ibv_wr_atomic_fetch_add(x, rkey, raddr, a);
	mlx5dv_wr_set_dc_addr(mx, ah, dctn, KEY);
	ibv_wr_set_sge(x, into->lkey, (uintptr_t)&got[slot], 8);
	CHECK_EQ(ibv_wr_complete(x), 0, "ibv_wr_complete");
	struct ibv_wc w = poll_bounded(dci->send_cq);
	CHECK_EQ(w.wr_id, slot, "the completion's wr_id");
	CHECK_EQ(w.qp_num, dci->qp_num, "the completion's qp_num: the DCI's");
	return w;
}

/* The chain the client runs and checks: a compare-and-swap that misses, one that matches,
 * then N_FAA fetch-and-adds; each WR's original value lands in got[]. */
static void chain(struct ibv_qp *dci, struct ibv_ah *ah, unsigned dctn, uint32_t rkey, uint64_t raddr,
		  struct ibv_mr *into)
{
	struct ibv_wc w = atomic(dci, ah, dctn, rkey, raddr, 1, START + 1, 7, into, 0);
	CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_COMP_SWAP, "CAS: status %d opcode %d", w.status, w.opcode);
	CHECK_EQ(w.byte_len, 8, "the atomic's byte_len");
	CHECK_EQ(got[0], START, "the CAS that misses: the original value");
	w = atomic(dci, ah, dctn, rkey, raddr, 1, START, SWAP, into, 1);
	CHECK(w.status == IBV_WC_SUCCESS, "CAS: %s", ibv_wc_status_str(w.status));
	CHECK_EQ(got[1], START, "the CAS that matches: the original value");
	for (int i = 0; i < N_FAA; i++) {
		w = atomic(dci, ah, dctn, rkey, raddr, 0, ADD, 0, into, 2 + i);
		CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_FETCH_ADD, "FAA %d: status %s opcode %d", i,
		      ibv_wc_status_str(w.status), w.opcode);
		CHECK_EQ(got[2 + i], SWAP + ADD * i, "a fetch-and-add's original value (each executed once, in order)");
	}
}

#define FINAL (SWAP + ADD * N_FAA)

int main(int argc, char **argv)
{
	int role = argc == 3 ? (strcmp(argv[1], "server") == 0 ? 1 : 2) : 0;
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 128, NULL, NULL, 0);
	int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *tmr = ibv_reg_mr(pd, target, sizeof(target), remote);
	struct ibv_mr *gmr = ibv_reg_mr(pd, got, sizeof(got), IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd && cq && tmr && gmr, "pd, cq, mrs");
	union ibv_gid gid;
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0, "ibv_query_gid");
	struct ibv_device_attr attr;
	CHECK_EQ(ibv_query_device(ctx, &attr), 0, "ibv_query_device");
	if (attr.atomic_cap == IBV_ATOMIC_NONE) {
		/* mlx5_qp_fill_wr_pfns: atomics asked for where the device has none. */
		CHECK(!make_dci(ctx, pd, cq, &gid), "a DCI with atomic send ops on a device without atomics");
		CHECK_EQ(errno, EOPNOTSUPP, "its errno");
		printf("atomic_cap NONE: a DCI with the atomic send ops is EOPNOTSUPP\n");
		return 0;
	}
	CHECK_EQ(attr.atomic_cap, IBV_ATOMIC_HCA, "atomic_cap");
	target[1] = START;
	if (role == 1) {
		struct ibv_qp *dct = make_dct(ctx, pd, cq, &gid, remote);
		dct_file_write(argv[2], dct->qp_num, &target[1], tmr->rkey, &gid);
		time_t end = time(NULL) + 60;
		while (__atomic_load_n(&target[1], __ATOMIC_SEQ_CST) != FINAL && time(NULL) < end)
			usleep(1000);
		CHECK_EQ(target[1], FINAL, "the target after the client's atomics");
		/* Requests sent again after a lost answer must not execute again. */
		usleep(300000);
		CHECK_EQ(target[1], FINAL, "the target a while later");
		CHECK(target[0] == 0 && target[2] == 0, "the words around the target untouched");
		printf("server: the DCT's target went from %llu to %llu (2 compare-and-swaps, %d fetch-and-adds "
		       "of %llu from a DCI of another process, each executed once)\n",
		       START, FINAL, N_FAA, ADD);
		return 0;
	}
	if (role == 2) {
		struct dct_addr far = dct_file_read(argv[2]);
		unsigned dctn = far.dctn, rkey = far.rkey;
		unsigned long long raddr = far.addr;
		union ibv_gid peer = far.gid;
		struct ibv_qp *dci = make_dci(ctx, pd, cq, &peer);
		CHECK(dci, "mlx5dv_create_qp(DCI): %s", strerror(errno));
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1, .grh = { .dgid = peer, .hop_limit = 64 } };
		struct ibv_ah *ah = ibv_create_ah(pd, &aa);
		CHECK(ah, "ibv_create_ah: %s", strerror(errno));
		chain(dci, ah, dctn, rkey, raddr, gmr);
		printf("client: 2 compare-and-swaps and %d fetch-and-adds to the DCT of another process returned "
		       "the original values in order\n", N_FAA);
		return 0;
	}
	/* One process: the DCT and the DCI on one device. */
	struct ibv_qp *dct = make_dct(ctx, pd, cq, &gid, remote);
	struct ibv_qp *dci = make_dci(ctx, pd, cq, &gid);
	CHECK(dci, "mlx5dv_create_qp(DCI): %s", strerror(errno));
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1, .grh = { .dgid = gid, .hop_limit = 64 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));
	chain(dci, ah, dct->qp_num, tmr->rkey, (uintptr_t)&target[1], gmr);
	CHECK_EQ(target[1], FINAL, "the target after the chain");
	CHECK(target[0] == 0 && target[2] == 0, "the words around the target untouched");
	struct ibv_wc w = atomic(dci, ah, dct->qp_num, tmr->rkey, (uintptr_t)&target[1] + 4, 0, 1, 0, gmr, 60);
	CHECK_EQ(w.status, IBV_WC_REM_INV_REQ_ERR, "a misaligned fetch-and-add");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	CHECK_EQ(ibv_query_qp(dct, &qa, IBV_QP_STATE, &qia), 0, "ibv_query_qp of the DCT");
	CHECK_EQ(qa.qp_state, IBV_QPS_RTR, "the DCT's state after refusing a request");
	struct ibv_mr *plain = ibv_reg_mr(pd, &target[4], 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(plain, "ibv_reg_mr without REMOTE_ATOMIC");
	struct ibv_qp *dci2 = make_dci(ctx, pd, cq, &gid);
	CHECK(dci2, "a second DCI");
	w = atomic(dci2, ah, dct->qp_num, plain->rkey, (uintptr_t)&target[4], 1, 0, 5, gmr, 61);
	CHECK_EQ(w.status, IBV_WC_REM_ACCESS_ERR, "a compare-and-swap into an MR without REMOTE_ATOMIC");
	CHECK_EQ(target[4], 0, "that MR's target untouched");
	CHECK_EQ(target[1], FINAL, "the first target untouched by the refusals");
	printf("DC atomics in one process: 2 compare-and-swaps and %d fetch-and-adds, then a misaligned one "
	       "(REM_INV_REQ_ERR, the DCT in RTR) and one without REMOTE_ATOMIC (REM_ACCESS_ERR)\n", N_FAA);
	return 0;
}
