/* Two processes are two simulated hosts: their devices have GUIDs and GIDs of their own, and
 * a QP of one connected to the (GID, QPN) of a QP of the other reaches no port of its own, so
 * its first request fails with RETRY_EXC_ERR rather than landing in itself. Simulator only: on
 * a card both processes share the device, so the test skips on the real libraries. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

struct addr {
	union ibv_gid gid;
	uint64_t guid;
	uint32_t qpn;
};

static struct ibv_qp *make_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	CHECK(qp, "ibv_create_qp: %s", strerror(errno));
	return qp;
}

int main(void)
{
	if (!dlsym(RTLD_DEFAULT, "mlx5sim_mlx5dv_query_device"))
		SKIP("two processes share a real device; host isolation is the simulator's");
	int up[2], down[2];
	CHECK(pipe(up) == 0 && pipe(down) == 0, "pipes");
	pid_t child = fork();
	CHECK(child >= 0, "fork");
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp *qp = make_qp(ctx, pd, cq);
	struct addr me = { .guid = ibv_get_device_guid(dev), .qpn = qp->qp_num };
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &me.gid), 0, "ibv_query_gid");
	if (child == 0) {
		/* The other host: publish the QP's address, keep it alive until told. */
		CHECK(write(up[1], &me, sizeof(me)) == sizeof(me), "write the address");
		char done;
		CHECK(read(down[0], &done, 1) == 1, "wait");
		return 0;
	}
	struct addr peer;
	CHECK(read(up[0], &peer, sizeof(peer)) == sizeof(peer), "read the peer's address");
	CHECK(memcmp(&peer.gid, &me.gid, sizeof(me.gid)) != 0, "two processes have different GIDs");
	CHECK(peer.guid != me.guid, "two processes have different node GUIDs");

	struct ibv_port_attr port;
	CHECK_EQ(ibv_query_port(ctx, 1, &port), 0, "ibv_query_port");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE };
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0, "INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = port.lid;
	if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer.gid;
		a.ah_attr.grh.hop_limit = 1;
	} else {
		a.ah_attr.dlid = port.lid + 1000; /* the peer's LID is not ours either */
	}
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), 0, "RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	a.timeout = 8;
	a.retry_cnt = 2;
	a.rnr_retry = 2;
	a.max_rd_atomic = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), 0, "RTS");

	char buf[64] = "two hosts";
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr");
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)buf + 32, .rkey = mr->rkey } };
	struct ibv_send_wr *bad;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send");
	struct ibv_wc wc;
	int n = 0;
	for (int i = 0; i < 10000000 && n == 0; i++)
		n = ibv_poll_cq(cq, 1, &wc);
	CHECK_EQ(n, 1, "a completion");
	CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR, "the request to the other host's QP");
	CHECK(memcmp(buf + 32, "two host", 8) != 0, "nothing landed in this process");

	CHECK(write(down[1], "x", 1) == 1, "release the other host");
	int status;
	CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the other host");
	printf("PASS\n");
	return 0;
}
