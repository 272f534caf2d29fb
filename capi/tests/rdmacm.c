/* librdmacm in one process, the two ends on one port: the event channel's fd (EAGAIN when
 * non-blocking and empty, readable by poll when an event waits), EINVAL, EADDRNOTAVAIL, ENODEV, a
 * loopback address bound as the wildcard, and the
 * private data limits of the calls, ADDR_ERROR for an address no port reaches (and no event
 * left once its ID is destroyed before the event is taken), ADDR_RESOLVED
 * and ROUTE_RESOLVED, CONNECT_REQUEST with the listener and the private data, a REJECTED with
 * the consumer's reason (28) and data, then a connection: ESTABLISHED on both sides with the
 * QPs in RTS facing each other, and DISCONNECTED on both after rdma_disconnect. */
#include <fcntl.h>
#include <ifaddrs.h>
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include "common.h"

static struct rdma_event_channel *ch;

/* The next event, waited for by poll on the channel's fd (5 s at most). */
static struct rdma_cm_event *next_event(void)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, 5000) == 1, "no event within 5 s");
	struct rdma_cm_event *ev;
	CHECK_EQ(rdma_get_cm_event(ch, &ev), 0, "rdma_get_cm_event");
	return ev;
}

static struct rdma_cm_event *expect(enum rdma_cm_event_type type, struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev = next_event();
	CHECK(ev->event == type, "event %s, expected %s (status %d)", rdma_event_str(ev->event),
	      rdma_event_str(type), ev->status);
	CHECK(!id || ev->id == id, "%s for another ID", rdma_event_str(type));
	return ev;
}

/* An active ID resolved up to its route to `to`. */
static struct rdma_cm_id *resolved(struct sockaddr_in *to)
{
	struct rdma_cm_id *id;
	CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0, "rdma_create_id");
	CHECK_EQ(rdma_resolve_route(id, 1000), -1, "rdma_resolve_route before the address");
	CHECK_EQ(errno, EINVAL, "its errno");
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)to, 1000), 0, "rdma_resolve_addr");
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_ADDR_RESOLVED, id));
	CHECK(id->verbs, "the resolved ID has a context");
	CHECK_EQ(rdma_resolve_route(id, 1000), 0, "rdma_resolve_route");
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_ROUTE_RESOLVED, id));
	return id;
}

static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	CHECK_EQ(rdma_create_qp(id, NULL, &a), 0, "rdma_create_qp");
	CHECK(id->qp && id->send_cq && id->recv_cq && id->send_cq_channel, "the QP and its CQs");
}

static struct ibv_qp_attr qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;
	CHECK_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_DEST_QPN, &i), 0, "ibv_query_qp");
	return a;
}

int main(void)
{
	ch = rdma_create_event_channel();
	if (!ch)
		SKIP("rdma_create_event_channel: %s (no RDMA CM here)", strerror(errno));
	int fl = fcntl(ch->fd, F_GETFL);
	CHECK_EQ(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK), 0, "O_NONBLOCK");
	struct rdma_cm_event *ev;
	CHECK_EQ(rdma_get_cm_event(ch, &ev), -1, "rdma_get_cm_event on an empty non-blocking channel");
	CHECK_EQ(errno, EAGAIN, "its errno");

	struct rdma_cm_id *srv;
	CHECK_EQ(rdma_create_id(ch, &srv, NULL, 77), -1, "rdma_create_id of an unknown port space");
	CHECK_EQ(rdma_create_id(ch, &srv, NULL, RDMA_PS_TCP), 0, "rdma_create_id");
	struct sockaddr_in addr = first_ipv4();

	struct sockaddr_in nowhere = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0afffffe) };
	CHECK_EQ(rdma_bind_addr(srv, (struct sockaddr *)&nowhere), -1, "rdma_bind_addr to no port's address");
	CHECK_EQ(errno, EADDRNOTAVAIL, "its errno");
	/* A loopback address no RDMA port has binds as the wildcard does (the kernel's
	 * cma_any_addr): no device. */
	struct rdma_cm_id *wild;
	CHECK_EQ(rdma_create_id(ch, &wild, NULL, RDMA_PS_TCP), 0, "rdma_create_id");
	struct sockaddr_in lo_only = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7ffffffe) };
	CHECK_EQ(rdma_bind_addr(wild, (struct sockaddr *)&lo_only), 0, "rdma_bind_addr to a loopback address of no port");
	CHECK(wild->verbs == NULL, "a loopback bind takes no device");
	CHECK_EQ(rdma_destroy_id(wild), 0, "rdma_destroy_id");
	/* Another address of the host that no RDMA port has: ENODEV (when the host has one). */
	struct ifaddrs *ifs, *i;
	CHECK_EQ(getifaddrs(&ifs), 0, "getifaddrs");
	for (i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		struct sockaddr_in host = *(struct sockaddr_in *)i->ifa_addr;
		if ((ntohl(host.sin_addr.s_addr) >> 24) == 127)
			continue;
		CHECK_EQ(rdma_bind_addr(srv, (struct sockaddr *)&host), -1, "rdma_bind_addr to a host address of no port");
		CHECK_EQ(errno, ENODEV, "its errno");
		break;
	}
	freeifaddrs(ifs);
	CHECK_EQ(rdma_bind_addr(srv, (struct sockaddr *)&addr), 0, "rdma_bind_addr");
	addr.sin_port = rdma_get_src_port(srv);
	CHECK(addr.sin_port != 0, "an ephemeral port");
	CHECK_EQ(rdma_listen(srv, 4), 0, "rdma_listen");

	/* An address no port reaches: ADDR_ERROR with a negative errno. */
	struct rdma_cm_id *lost;
	CHECK_EQ(rdma_create_id(ch, &lost, NULL, RDMA_PS_TCP), 0, "rdma_create_id");
	CHECK_EQ(rdma_resolve_addr(lost, NULL, (struct sockaddr *)&nowhere, 500), 0, "rdma_resolve_addr");
	ev = expect(RDMA_CM_EVENT_ADDR_ERROR, lost);
	CHECK(ev->status < 0, "ADDR_ERROR's status %d: a negative errno", ev->status);
	rdma_ack_cm_event(ev);
	CHECK_EQ(rdma_destroy_id(lost), 0, "rdma_destroy_id");
	/* An ID destroyed before its event was taken takes the event along (the kernel's
	 * ucma_destroy_id): the channel has nothing left, EAGAIN. */
	struct rdma_cm_id *gone;
	CHECK_EQ(rdma_create_id(ch, &gone, NULL, RDMA_PS_TCP), 0, "rdma_create_id");
	CHECK_EQ(rdma_resolve_addr(gone, NULL, (struct sockaddr *)&nowhere, 500), 0, "rdma_resolve_addr");
	struct pollfd waiting = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&waiting, 1, 5000) == 1, "the ADDR_ERROR waits on the channel");
	CHECK_EQ(rdma_destroy_id(gone), 0, "rdma_destroy_id with its event not taken");
	CHECK_EQ(rdma_get_cm_event(ch, &ev), -1, "rdma_get_cm_event once the event went with its ID");
	CHECK_EQ(errno, EAGAIN, "its errno");

	/* A request, rejected with private data. */
	struct rdma_cm_id *cli = resolved(&addr);
	char data[57];
	memset(data, 'd', sizeof data);
	struct rdma_conn_param p = { .private_data = data, .private_data_len = 57, .responder_resources = 1,
				     .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	CHECK_EQ(rdma_connect(cli, &p), -1, "rdma_connect with 57 bytes of private data");
	CHECK_EQ(errno, EINVAL, "its errno");
	p.private_data_len = 56;
	CHECK_EQ(rdma_connect(cli, &p), 0, "rdma_connect");
	ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	CHECK(ev->listen_id == srv, "the listener's request");
	CHECK_EQ(ev->param.conn.private_data_len, 56, "the request's private data length");
	CHECK(!memcmp(ev->param.conn.private_data, data, 56), "the request's private data");
	struct rdma_cm_id *req = ev->id;
	rdma_ack_cm_event(ev);
	struct rdma_conn_param big = { .private_data = data, .private_data_len = 197 };
	char refusal[149] = "no";
	CHECK_EQ(rdma_accept(req, &big), -1, "rdma_accept with 197 bytes of private data");
	CHECK_EQ(errno, EINVAL, "its errno");
	CHECK_EQ(rdma_reject(req, refusal, 149), -1, "rdma_reject with 149 bytes");
	CHECK_EQ(errno, EINVAL, "its errno");
	CHECK_EQ(rdma_reject(req, refusal, 3), 0, "rdma_reject");
	ev = expect(RDMA_CM_EVENT_REJECTED, cli);
	CHECK_EQ(ev->status, 28, "REJECTED's status: the consumer's reason");
	CHECK(!strcmp(ev->param.conn.private_data, "no"), "the REJ's private data");
	rdma_ack_cm_event(ev);
	CHECK_EQ(rdma_destroy_id(req), 0, "rdma_destroy_id");
	CHECK_EQ(rdma_destroy_id(cli), 0, "rdma_destroy_id");

	/* A connection with QPs. */
	cli = resolved(&addr);
	make_qp(cli);
	CHECK_EQ(qp_state(cli->qp).qp_state, IBV_QPS_INIT, "rdma_create_qp's QP state");
	CHECK_EQ(rdma_connect(cli, &p), 0, "rdma_connect");
	ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	req = ev->id;
	rdma_ack_cm_event(ev);
	make_qp(req);
	struct rdma_conn_param acc = { .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7 };
	CHECK_EQ(rdma_accept(req, &acc), 0, "rdma_accept");
	CHECK_EQ(rdma_accept(req, &acc), -1, "rdma_accept again");
	CHECK_EQ(errno, EINVAL, "its errno");
	int seen = 0;
	for (int i = 0; i < 2; i++) {
		ev = next_event();
		CHECK(ev->event == RDMA_CM_EVENT_ESTABLISHED, "event %s, expected ESTABLISHED", rdma_event_str(ev->event));
		seen |= ev->id == cli ? 1 : ev->id == req ? 2 : 4;
		rdma_ack_cm_event(ev);
	}
	CHECK_EQ(seen, 3, "ESTABLISHED on both sides");
	struct ibv_qp_attr a = qp_state(cli->qp), b = qp_state(req->qp);
	CHECK_EQ(a.qp_state, IBV_QPS_RTS, "the active side's QP");
	CHECK_EQ(b.qp_state, IBV_QPS_RTS, "the passive side's QP");
	CHECK_EQ(a.dest_qp_num, req->qp->qp_num, "the active QP faces the passive one");
	CHECK_EQ(b.dest_qp_num, cli->qp->qp_num, "the passive QP faces the active one");
	CHECK_EQ(rdma_disconnect(cli), 0, "rdma_disconnect");
	seen = 0;
	for (int i = 0; i < 2; i++) {
		ev = next_event();
		CHECK(ev->event == RDMA_CM_EVENT_DISCONNECTED, "event %s, expected DISCONNECTED", rdma_event_str(ev->event));
		seen |= ev->id == cli ? 1 : ev->id == req ? 2 : 4;
		rdma_ack_cm_event(ev);
	}
	CHECK_EQ(seen, 3, "DISCONNECTED on both sides");
	CHECK_EQ(qp_state(cli->qp).qp_state, IBV_QPS_ERR, "rdma_disconnect's QP");
	rdma_destroy_qp(cli);
	rdma_destroy_qp(req);
	CHECK_EQ(rdma_destroy_id(req), 0, "rdma_destroy_id");
	CHECK_EQ(rdma_destroy_id(cli), 0, "rdma_destroy_id");
	CHECK_EQ(rdma_destroy_id(srv), 0, "rdma_destroy_id");
	rdma_destroy_event_channel(ch);
	printf("librdmacm in one process: events, errnos, a rejection and a connection\n");
	return 0;
}
