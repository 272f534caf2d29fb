/* One side of DC between two processes (capi/tests/two_processes_dc.sh).
 *   dc_peer server FILE: a DCT on an SRQ; writes its number, GID, buffer address and rkey to
 *     FILE, then waits for 4 SENDs and checks them and the bytes an RDMA WRITE put before them.
 *   dc_peer client FILE: reads FILE, then a DCI in RTS sends an RDMA WRITE of 5000 bytes, an
 *     RDMA READ of 3000 and 4 SENDs of 3000 bytes (path MTU 1024: several packets each) to
 *     the DCT through mlx5dv_wr_set_dc_addr, and checks the completions and the READ's bytes.
 * Every wait is bounded; exit 0 on success, 1 on a failed check. */
#include <time.h>
#include <unistd.h>

#include "../common.h"
#include "dct_file.h"

#define KEY 0x0123456789abcdefULL
#define N_SENDS 4
#define LEN 3000
#define WRITE_AT 16384
#define WRITE_LEN 5000
#define READ_AT 24576
#define READ_LEN 3000

static uint8_t buf[32768];

static uint8_t byte_at(int i)
{
	return (uint8_t)(i * 13 + 5);
}

static int modify(struct ibv_qp *qp, enum ibv_qp_state to, int mask, union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = to, .port_num = 1, .path_mtu = IBV_MTU_1024, .min_rnr_timer = 12, .timeout = 14,
		.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
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

int main(int argc, char **argv)
{
	if (argc != 3)
		FAIL("usage: dc_peer server|client FILE");
	int server = strcmp(argv[1], "server") == 0;
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(pd && cq && mr, "pd, cq, mr");
	union ibv_gid gid;
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0, "ibv_query_gid");
	int s = IBV_QP_STATE;
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_DRIVER, .sq_sig_all = 1,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 }, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};
	struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC };
	if (server) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
		struct ibv_srq *srq = ibv_create_srq(pd, &sa);
		CHECK(srq, "ibv_create_srq");
		a.srq = srq;
		dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
		dv.dc_init_attr.dct_access_key = KEY;
		struct ibv_qp *dct = mlx5dv_create_qp(ctx, &a, &dv);
		CHECK(dct, "mlx5dv_create_qp(DCT): %s", strerror(errno));
		CHECK_EQ(modify(dct, IBV_QPS_INIT, s | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT, &gid), 0,
			 "DCT to INIT");
		CHECK_EQ(modify(dct, IBV_QPS_RTR, s | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU, &gid), 0,
			 "DCT to RTR");
		for (int i = 0; i < READ_LEN; i++)
			buf[READ_AT + i] = byte_at(i + 7);
		for (int i = 0; i < N_SENDS; i++) {
			struct ibv_sge sg = { .addr = (uintptr_t)buf + 4096 * i, .length = 4096, .lkey = mr->lkey };
			struct ibv_recv_wr rw = { .wr_id = 100 + i, .sg_list = &sg, .num_sge = 1 }, *bad;
			CHECK_EQ(ibv_post_srq_recv(srq, &rw, &bad), 0, "ibv_post_srq_recv");
		}
		dct_file_write(argv[2], dct->qp_num, buf, mr->rkey, &gid);
		for (int i = 0; i < N_SENDS; i++) {
			struct ibv_wc w = poll_bounded(cq);
			CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_RECV, "receive %d: status %d opcode %d", i,
			      w.status, w.opcode);
			CHECK_EQ(w.wr_id, 100 + i, "the receives in order");
			CHECK_EQ(w.qp_num, dct->qp_num, "the receive's qp_num: the DCT's");
			CHECK_EQ(w.byte_len, LEN, "the SEND's byte_len");
			for (int j = 0; j < LEN; j++)
				CHECK_EQ(buf[4096 * i + j], byte_at(j + i), "a SEND's bytes");
		}
		for (int j = 0; j < WRITE_LEN; j++)
			CHECK_EQ(buf[WRITE_AT + j], byte_at(j + 99), "the WRITE's bytes");
		printf("server: the DCT took an RDMA WRITE of %d bytes and %d SENDs of %d bytes from a DCI of "
		       "another process\n", WRITE_LEN, N_SENDS, LEN);
		return 0;
	}
	struct dct_addr far = dct_file_read(argv[2]);
	unsigned dctn = far.dctn, rkey = far.rkey;
	unsigned long long raddr = far.addr;
	union ibv_gid peer = far.gid;
	a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ;
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	struct ibv_qp *dci = mlx5dv_create_qp(ctx, &a, &dv);
	CHECK(dci, "mlx5dv_create_qp(DCI): %s", strerror(errno));
	CHECK_EQ(modify(dci, IBV_QPS_INIT, s | IBV_QP_PKEY_INDEX | IBV_QP_PORT, &peer), 0, "DCI to INIT");
	CHECK_EQ(modify(dci, IBV_QPS_RTR, s | IBV_QP_PATH_MTU | IBV_QP_AV, &peer), 0, "DCI to RTR");
	int rts = s | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN;
	CHECK_EQ(modify(dci, IBV_QPS_RTS, rts, &peer), 0, "DCI to RTS");
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1, .grh = { .dgid = peer, .hop_limit = 64 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));
	for (int j = 0; j < WRITE_LEN; j++)
		buf[WRITE_AT + j] = byte_at(j + 99);
	for (int i = 0; i < N_SENDS; i++)
		for (int j = 0; j < LEN; j++)
			buf[4096 * i + j] = byte_at(j + i);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(dci);
	struct mlx5dv_qp_ex *mx = mlx5dv_qp_ex_from_ibv_qp_ex(x);
	ibv_wr_start(x);
	x->wr_id = 1;
	ibv_wr_rdma_write(x, rkey, raddr + WRITE_AT);
	mlx5dv_wr_set_dc_addr(mx, ah, dctn, KEY);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf + WRITE_AT, WRITE_LEN);
	x->wr_id = 2;
	ibv_wr_rdma_read(x, rkey, raddr + READ_AT);
	mlx5dv_wr_set_dc_addr(mx, ah, dctn, KEY);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf + READ_AT, READ_LEN);
	for (int i = 0; i < N_SENDS; i++) {
		x->wr_id = 10 + i;
		ibv_wr_send(x);
		mlx5dv_wr_set_dc_addr(mx, ah, dctn, KEY);
		ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf + 4096 * i, LEN);
	}
	CHECK_EQ(ibv_wr_complete(x), 0, "ibv_wr_complete");
	uint64_t want[] = { 1, 2, 10, 11, 12, 13 };
	for (int i = 0; i < 6; i++) {
		struct ibv_wc w = poll_bounded(cq);
		CHECK(w.status == IBV_WC_SUCCESS, "wr_id %llu: status %d (%s)", (unsigned long long)w.wr_id, w.status,
		      ibv_wc_status_str(w.status));
		CHECK_EQ(w.wr_id, want[i], "the completions in order");
		CHECK_EQ(w.qp_num, dci->qp_num, "a completion's qp_num: the DCI's");
	}
	for (int j = 0; j < READ_LEN; j++)
		CHECK_EQ(buf[READ_AT + j], byte_at(j + 7), "the READ's bytes");
	printf("client: a DCI's RDMA WRITE, READ and %d SENDs to the DCT of another process completed\n", N_SENDS);
	return 0;
}
