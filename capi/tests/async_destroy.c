/* Asynchronous events and destroy: a QP's event the program has not read goes with the QP
 * (uverbs drops a destroyed object's events), so no event names a QP that is gone; an event
 * thread blocked in ibv_get_async_event waits on for the next event, and gets it whole. The
 * responder's QP_ACCESS_ERR comes from an RDMA WRITE to a bad rkey. */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include "common.h"

/* A connected pair on `cq`: the requester writes 8 bytes to a bad rkey and completes with
 * REM_ACCESS_ERR; the responder's QP_ACCESS_ERR is then queued. */
static void bad_write(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_mr *mr,
		      struct end *req, struct end *resp)
{
	req->cq = resp->cq = cq;
	req->qp = rc_qp(ctx, pd, cq, 0);
	resp->qp = rc_qp(ctx, pd, cq, 0);
	CHECK(req->qp && resp->qp, "rc_qp: %s", strerror(errno));
	connect_qp(ctx, req->qp, resp->qp);
	connect_qp(ctx, resp->qp, req->qp);
	struct ibv_sge s = { .addr = (uintptr_t)mr->addr, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)mr->addr, .rkey = mr->rkey ^ 0x100 } },
			   *bad;
	CHECK_EQ(ibv_post_send(req->qp, &wr, &bad), 0, "ibv_post_send");
	struct ibv_wc wc = poll_one(cq);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR, "the WRITE to a bad rkey");
}

/* The responder's event is queued once the requester saw its error: wait (bounded) until the
 * async fd is readable. */
static void wait_readable(int fd)
{
	for (int i = 0; i < 5000; i++) {
		struct timeval tv = { 0, 1000 };
		fd_set r;
		FD_ZERO(&r);
		FD_SET(fd, &r);
		if (select(fd + 1, &r, NULL, NULL, &tv) == 1)
			return;
	}
	FAIL("the async fd is not readable within 5 s");
}

struct waiter {
	struct ibv_context *ctx;
	struct ibv_async_event ev;
	int rc, err;
};

/* A blocking ibv_get_async_event on its own thread, as a program's event thread makes it. */
static void *wait_event(void *arg)
{
	struct waiter *w = arg;
	errno = 0;
	w->rc = ibv_get_async_event(w->ctx, &w->ev);
	w->err = errno;
	return NULL;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq, "ibv_alloc_pd, ibv_create_cq");
	static char buf[64];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr");
	int fl = fcntl(ctx->async_fd, F_GETFL);

	/* The responder is destroyed before its event is read: its event is never delivered. */
	struct end a, b;
	bad_write(ctx, pd, cq, mr, &a, &b);
	wait_readable(ctx->async_fd);
	CHECK_EQ(ibv_destroy_qp(b.qp), 0, "ibv_destroy_qp (the responder)");

	/* An event thread already waiting gets the next event, of a responder that stays, and
	 * it names that responder. */
	struct waiter w = { .ctx = ctx };
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, wait_event, &w), 0, "pthread_create");
	usleep(100000);
	struct end c, d;
	bad_write(ctx, pd, cq, mr, &c, &d);
	CHECK_EQ(pthread_join(t, NULL), 0, "pthread_join");
	CHECK_EQ(w.rc, 0, "the event thread's ibv_get_async_event");
	struct ibv_async_event ev = w.ev;
	CHECK_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR, "the event's type");
	CHECK(ev.element.qp == d.qp, "the event's QP is the live responder (%p, not %p)", (void *)ev.element.qp,
	      (void *)d.qp);
	CHECK_EQ(ev.element.qp->qp_num, d.qp->qp_num, "its qp_num");
	ibv_ack_async_event(&ev);
	CHECK(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK on the async fd");
	errno = 0;
	CHECK_EQ(ibv_get_async_event(ctx, &ev), -1, "ibv_get_async_event, no event left");
	CHECK_EQ(errno, EAGAIN, "its errno");

	for (struct ibv_qp **q = (struct ibv_qp *[]){ a.qp, c.qp, d.qp, NULL }; *q; q++)
		CHECK_EQ(ibv_destroy_qp(*q), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	printf("async_destroy: ok\n");
	return 0;
}
