/* DC messages sent again between two processes (capi/tests/two_processes_dc_resend.sh;
 * docs/behaviour.md items 337 and 338), run with ACKs and requests lost on the way.
 *   dc_resend server FILE: a DCT on an SRQ; writes its number, GID, buffer address and rkey
 *     to FILE, then takes N messages and checks each came once and in order: SENDs carry
 *     their number in their first 4 bytes, SEND and WRITE with immediate in the immediate.
 *     Then, until the client's FILE.done appears, no further receive may complete.
 *   dc_resend client FILE: reads FILE; a DCI sends the N messages (SEND, SEND with
 *     immediate, WRITE with immediate in turn), 8 at a time, checks their completions, then
 *     resets the DCI, brings it up again (its PSNs from 0 again) and sends 8 more; writes
 *     FILE.done.
 * Every wait is bounded; exit 0 on success, 1 on a failed check. */
#include <time.h>
#include <unistd.h>

#include "../common.h"
#include "dct_file.h"

#define KEY 0x0123456789abcdefULL
#define N 160
#define AFTER_RESET 8
#define BATCH 8
#define SLOT 64
#define RECVS 64
#define WRITE_AT 16384

static uint8_t buf[32768];

static int modify(struct ibv_qp *qp, enum ibv_qp_state to, int mask, union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = to, .port_num = 1, .path_mtu = IBV_MTU_1024, .min_rnr_timer = 12, .timeout = 12,
		.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = *gid, .hop_limit = 64 } },
	};
	return ibv_modify_qp(qp, &a, mask) ? errno : 0;
}

/* The next completion within `secs` seconds; status -1 if none came. */
static struct ibv_wc poll_for(struct ibv_cq *cq, int secs)
{
	struct ibv_wc w = { .status = -1 };
	time_t end = time(NULL) + secs;
	while (time(NULL) < end) {
		int n = ibv_poll_cq(cq, 1, &w);
		CHECK(n >= 0, "ibv_poll_cq: %d", n);
		if (n == 1)
			return w;
		usleep(100);
	}
	w.status = -1;
	return w;
}

static void post_recv(struct ibv_srq *srq, struct ibv_mr *mr, int slot)
{
	struct ibv_sge sg = { .addr = (uintptr_t)buf + SLOT * slot, .length = SLOT, .lkey = mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = slot, .sg_list = &sg, .num_sge = 1 }, *bad;
	CHECK_EQ(ibv_post_srq_recv(srq, &rw, &bad), 0, "ibv_post_srq_recv");
}

static void bring_up_dci(struct ibv_qp *dci, union ibv_gid *peer)
{
	int s = IBV_QP_STATE;
	CHECK_EQ(modify(dci, IBV_QPS_INIT, s | IBV_QP_PKEY_INDEX | IBV_QP_PORT, peer), 0, "DCI to INIT");
	CHECK_EQ(modify(dci, IBV_QPS_RTR, s | IBV_QP_PATH_MTU | IBV_QP_AV, peer), 0, "DCI to RTR");
	int rts = s | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN;
	CHECK_EQ(modify(dci, IBV_QPS_RTS, rts, peer), 0, "DCI to RTS");
}

static int server(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_mr *mr,
		  struct ibv_qp_init_attr_ex *a, struct mlx5dv_qp_init_attr *dv, const char *file)
{
	union ibv_gid gid;
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0, "ibv_query_gid");
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = RECVS, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	CHECK(srq, "ibv_create_srq");
	a->srq = srq;
	dv->dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
	dv->dc_init_attr.dct_access_key = KEY;
	struct ibv_qp *dct = mlx5dv_create_qp(ctx, a, dv);
	CHECK(dct, "mlx5dv_create_qp(DCT): %s", strerror(errno));
	int s = IBV_QP_STATE;
	CHECK_EQ(modify(dct, IBV_QPS_INIT, s | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT, &gid), 0,
		 "DCT to INIT");
	CHECK_EQ(modify(dct, IBV_QPS_RTR, s | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU, &gid), 0,
		 "DCT to RTR");
	for (int i = 0; i < RECVS; i++)
		post_recv(srq, mr, i);
	dct_file_write(file, dct->qp_num, buf, mr->rkey, &gid);
	int total = N + AFTER_RESET;
	for (int i = 0; i < total; i++) {
		struct ibv_wc w = poll_for(cq, 60);
		CHECK(w.status == IBV_WC_SUCCESS, "message %d: status %d", i, w.status);
		uint32_t seq;
		if (w.opcode == IBV_WC_RECV && !(w.wc_flags & IBV_WC_WITH_IMM)) {
			CHECK_EQ(w.byte_len, 4 + i % 13, "a SEND's byte_len");
			memcpy(&seq, buf + SLOT * w.wr_id, 4);
		} else {
			CHECK(w.wc_flags & IBV_WC_WITH_IMM, "message %d: opcode %d without an immediate", i, w.opcode);
			seq = ntohl(w.imm_data);
		}
		CHECK_EQ(seq, i, "the message received next (each once, in order)");
		CHECK_EQ(w.qp_num, dct->qp_num, "the receive's qp_num");
		post_recv(srq, mr, (int)w.wr_id);
	}
	/* Duplicates still on their way until the client is done: none may be received. */
	char done[4096];
	snprintf(done, sizeof(done), "%s.done", file);
	int extra = 0;
	for (int i = 0; i < 600 && access(done, F_OK) != 0; i++) {
		struct ibv_wc w;
		extra += ibv_poll_cq(cq, 1, &w) > 0;
		usleep(100000);
	}
	CHECK_EQ(access(done, F_OK), 0, "the client's done file");
	usleep(300000);
	struct ibv_wc w;
	extra += ibv_poll_cq(cq, 1, &w) > 0;
	CHECK_EQ(extra, 0, "receives past the messages sent");
	printf("server: the DCT received each of %d DC messages once and in order\n", total);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		FAIL("usage: dc_resend server|client FILE");
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 128, NULL, NULL, 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(pd && cq && mr, "pd, cq, mr");
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_DRIVER, .sq_sig_all = 1,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 }, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};
	struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC };
	if (strcmp(argv[1], "server") == 0)
		return server(ctx, pd, cq, mr, &a, &dv, argv[2]);
	struct dct_addr far = dct_file_read(argv[2]);
	unsigned dctn = far.dctn, rkey = far.rkey;
	unsigned long long raddr = far.addr;
	union ibv_gid peer = far.gid;
	a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	struct ibv_qp *dci = mlx5dv_create_qp(ctx, &a, &dv);
	CHECK(dci, "mlx5dv_create_qp(DCI): %s", strerror(errno));
	bring_up_dci(dci, &peer);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1, .grh = { .dgid = peer, .hop_limit = 64 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(dci);
	struct mlx5dv_qp_ex *mx = mlx5dv_qp_ex_from_ibv_qp_ex(x);
	int total = N + AFTER_RESET;
	for (int at = 0; at < total; at += BATCH) {
		if (at == N) {
			CHECK_EQ(modify(dci, IBV_QPS_RESET, IBV_QP_STATE, &peer), 0, "DCI to RESET");
			bring_up_dci(dci, &peer);
		}
		ibv_wr_start(x);
		for (int i = at; i < at + BATCH; i++) {
			uint32_t seq = (uint32_t)i;
			memcpy(buf + SLOT * (i % 16), &seq, 4);
			x->wr_id = i;
			switch (i % 3) {
			case 0:
				ibv_wr_send(x);
				break;
			case 1:
				ibv_wr_send_imm(x, htonl(seq));
				break;
			default:
				ibv_wr_rdma_write_imm(x, rkey, raddr + WRITE_AT, htonl(seq));
			}
			mlx5dv_wr_set_dc_addr(mx, ah, dctn, KEY);
			ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf + SLOT * (i % 16), 4 + i % 13);
		}
		CHECK_EQ(ibv_wr_complete(x), 0, "ibv_wr_complete");
		for (int i = at; i < at + BATCH; i++) {
			struct ibv_wc w = poll_for(cq, 60);
			CHECK(w.status == IBV_WC_SUCCESS, "wr_id %llu: status %d (%s)", (unsigned long long)w.wr_id,
			      w.status, w.status < 0 ? "none" : ibv_wc_status_str(w.status));
			CHECK_EQ(w.wr_id, i, "the completions in order");
		}
	}
	char done[4096];
	snprintf(done, sizeof(done), "%s.done", argv[2]);
	FILE *d = fopen(done, "w");
	CHECK(d, "fopen %s", done);
	fclose(d);
	printf("client: a DCI sent %d DC messages (SEND, SEND and WRITE with immediate), %d of them after a reset\n",
	       total, AFTER_RESET);
	return 0;
}
