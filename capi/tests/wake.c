/* The device wakes a sleeping program: one thread arms its CQ and blocks in
 * ibv_get_cq_event, making no other call; another thread WRITEs with immediate and SENDs to
 * that thread's QP. The sleeper wakes with the completions, which only a device that runs by
 * itself can deliver. */
#include <pthread.h>

#include "common.h"

enum { LEN = 64, ROUNDS = 20 };

static struct ibv_context *ctx;
static struct ibv_comp_channel *channel;
static struct ibv_cq *sleeper_cq;
static struct ibv_qp *sleeper_qp;
static uint8_t *rbuf;

static void *sleeper(void *arg)
{
	(void)arg;
	/* The sender may be rounds ahead: completions are counted across rounds, in order. */
	int seen = 0;
	while (seen < 2 * ROUNDS) {
		struct ibv_cq *cq;
		void *cq_ctx;
		CHECK_EQ(ibv_get_cq_event(channel, &cq, &cq_ctx), 0, "ibv_get_cq_event");
		CHECK(cq == sleeper_cq, "the event names the sleeper's CQ");
		ibv_ack_cq_events(cq, 1);
		CHECK_EQ(ibv_req_notify_cq(cq, 0), 0, "re-arm");
		struct ibv_wc wc[2];
		int n;
		while ((n = ibv_poll_cq(cq, 2, wc)) > 0) {
			for (int i = 0; i < n; i++) {
				CHECK_EQ(wc[i].status, IBV_WC_SUCCESS, "the receive");
				CHECK(wc[i].wc_flags & IBV_WC_WITH_IMM, "with immediate data");
				CHECK_EQ(ntohl(wc[i].imm_data), (uint32_t)(seen + i), "immediate data");
			}
			seen += n;
		}
		CHECK(n == 0, "ibv_poll_cq");
	}
	return NULL;
}

int main(void)
{
	struct ibv_device **list;
	ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	channel = ibv_create_comp_channel(ctx);
	CHECK(pd && channel, "PD and channel");
	sleeper_cq = ibv_create_cq(ctx, 64, NULL, channel, 0);
	struct ibv_cq *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(sleeper_cq && scq, "CQs");
	struct ibv_qp_init_attr qa = { .send_cq = sleeper_cq, .recv_cq = sleeper_cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 2 * ROUNDS, .max_send_sge = 1,
						.max_recv_sge = 1 } };
	sleeper_qp = ibv_create_qp(pd, &qa);
	qa.send_cq = qa.recv_cq = scq;
	struct ibv_qp *sender = ibv_create_qp(pd, &qa);
	CHECK(sleeper_qp && sender, "QPs");
	connect_qp(ctx, sleeper_qp, sender);
	connect_qp(ctx, sender, sleeper_qp);

	rbuf = calloc(1, LEN);
	uint8_t *sbuf = calloc(1, LEN);
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, LEN, rw), *smr = ibv_reg_mr(pd, sbuf, LEN, rw);
	CHECK(rmr && smr, "MRs");
	/* Every receive the sleeper will need, posted before it sleeps. */
	for (int i = 0; i < 2 * ROUNDS; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)rbuf, .length = LEN, .lkey = rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK_EQ(ibv_post_recv(sleeper_qp, &wr, &bad), 0, "ibv_post_recv");
	}
	CHECK_EQ(ibv_req_notify_cq(sleeper_cq, 0), 0, "arm");
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, sleeper, NULL), 0, "pthread_create");

	for (int r = 0; r < ROUNDS; r++) {
		struct ibv_sge sge = { .addr = (uintptr_t)sbuf, .length = 8, .lkey = smr->lkey };
		struct ibv_send_wr w[2] = {
			{ .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
			  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl((uint32_t)(2 * r)),
			  .wr.rdma = { .remote_addr = (uintptr_t)rbuf, .rkey = rmr->rkey } },
			{ .wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
			  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl((uint32_t)(2 * r + 1)) },
		};
		w[0].next = &w[1];
		struct ibv_send_wr *bad;
		CHECK_EQ(ibv_post_send(sender, &w[0], &bad), 0, "ibv_post_send");
		struct ibv_wc wc;
		for (int i = 0; i < 2; i++) {
			wc = poll_one(scq);
			CHECK_EQ(wc.status, IBV_WC_SUCCESS, "the sender's completion");
		}
	}
	CHECK_EQ(pthread_join(t, NULL), 0, "the sleeper woke for every completion");
	ibv_destroy_qp(sleeper_qp);
	ibv_destroy_qp(sender);
	ibv_dereg_mr(rmr);
	ibv_dereg_mr(smr);
	ibv_destroy_cq(sleeper_cq);
	ibv_destroy_cq(scq);
	ibv_destroy_comp_channel(channel);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("PASS: %d rounds, the sleeper woken by the device\n", ROUNDS);
	return 0;
}
