// One side of a librdmacm exchange for two_processes_cm_ud.sh, printing what it sees.
//   cm_peer server ADDR PORT MODE   MODE: ud-reject | ud-vanish | vanish | idle | est-vanish | est-disc
//                                         | rep-lost | slow-accept
//   cm_peer client ADDR PORT MODE   MODE: ud | rc | rc-est | rc-disc | rc-rep-vanish | rc-slow
// Servers: ud-reject rejects a UD request with private data; vanish exits at the CONNECT_REQUEST
// without answering (ud-vanish: a UD one); idle runs the CM with no listener; est-vanish exits once ESTABLISHED;
// est-disc waits for DISCONNECTED and TIMEWAIT_EXIT; rep-lost accepts and prints what ends its
// REP; slow-accept accepts 2 s after the CONNECT_REQUEST. rc-rep-vanish connects without a QP and
// exits at the CONNECT_RESPONSE (no RTU); rc-slow takes its first event 2 s after rdma_connect.
// Clients print each event with its status
// and the milliseconds since rdma_connect.
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

static struct rdma_event_channel *ch;
static struct timespec t0;

static long ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
}

// The next event within `timeout_ms`, or NULL.
static struct rdma_cm_event *next(int timeout_ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;

	if (poll(&p, 1, timeout_ms) != 1 || rdma_get_cm_event(ch, &e))
		return NULL;
	printf("event %s status %d after %ld ms\n", rdma_event_str(e->event), e->status, ms());
	fflush(stdout);
	return e;
}

static struct rdma_cm_event *expect(enum rdma_cm_event_type want, int timeout_ms)
{
	struct rdma_cm_event *e = next(timeout_ms);

	if (!e || e->event != want) {
		printf("wanted %s\n", rdma_event_str(want));
		exit(1);
	}
	return e;
}

static struct sockaddr_in addr(const char *a, const char *port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(atoi(port)) };

	inet_pton(AF_INET, a, &s.sin_addr);
	return s;
}

static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
					       .max_recv_sge = 1 },
				      .qp_type = id->qp_type };

	if (rdma_create_qp(id, NULL, &a)) {
		perror("rdma_create_qp");
		exit(1);
	}
}

static int server(struct sockaddr_in a, const char *mode)
{
	enum rdma_port_space ps = strncmp(mode, "ud-", 3) ? RDMA_PS_TCP : RDMA_PS_UDP;
	struct rdma_cm_id *l, *id;
	struct rdma_cm_event *e;

	if (!strcmp(mode, "idle")) {
		sleep(3);
		return 0;
	}
	if (rdma_create_id(ch, &l, NULL, ps) || rdma_bind_addr(l, (struct sockaddr *)&a) || rdma_listen(l, 1)) {
		perror("listen");
		return 1;
	}
	e = expect(RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	id = e->id;
	printf("request: private_data_len %d '%s'\n", e->param.conn.private_data_len,
	       e->param.conn.private_data ? (const char *)e->param.conn.private_data : "");
	fflush(stdout);
	if (!strcmp(mode, "vanish") || !strcmp(mode, "ud-vanish"))
		_exit(0);
	if (!strcmp(mode, "ud-reject")) {
		rdma_reject(id, "no thanks", 10);
		rdma_ack_cm_event(e);
		sleep(1);
		return 0;
	}
	make_qp(id);
	rdma_ack_cm_event(e);
	if (!strcmp(mode, "slow-accept"))
		sleep(2);
	if (rdma_accept(id, &(struct rdma_conn_param){ .retry_count = 7, .rnr_retry_count = 7 })) {
		perror("rdma_accept");
		return 1;
	}
	if (!strcmp(mode, "rep-lost")) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		return next(120000) ? 0 : 1;
	}
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED, 10000));
	if (!strcmp(mode, "est-vanish"))
		_exit(0);
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED, 10000));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_TIMEWAIT_EXIT, 10000));
	return 0;
}

static int client(struct sockaddr_in a, const char *mode)
{
	enum rdma_port_space ps = strcmp(mode, "ud") ? RDMA_PS_TCP : RDMA_PS_UDP;
	struct rdma_conn_param p = { .private_data = "hello", .private_data_len = 6, .retry_count = 7,
				     .rnr_retry_count = 7 };
	struct rdma_cm_id *id;
	struct rdma_cm_event *e;

	if (rdma_create_id(ch, &id, NULL, ps) || rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000))
		return 1;
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_ADDR_RESOLVED, 5000));
	if (rdma_resolve_route(id, 2000))
		return 1;
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_ROUTE_RESOLVED, 5000));
	if (strcmp(mode, "rc-rep-vanish"))
		make_qp(id);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (rdma_connect(id, &p)) {
		perror("rdma_connect");
		return 1;
	}
	if (!strcmp(mode, "rc-slow"))
		sleep(2);
	e = next(120000);
	if (!e)
		return 1;
	if (e->event == RDMA_CM_EVENT_ESTABLISHED && ps == RDMA_PS_UDP) {
		char g[INET6_ADDRSTRLEN];

		inet_ntop(AF_INET6, e->param.ud.ah_attr.grh.dgid.raw, g, sizeof g);
		printf("ud: qp_num %#x qkey %#x private_data_len %d ah: is_global %d dgid %s hop_limit %d\n",
		       e->param.ud.qp_num, e->param.ud.qkey, e->param.ud.private_data_len,
		       e->param.ud.ah_attr.is_global, g, e->param.ud.ah_attr.grh.hop_limit);
	}
	if (e->event == RDMA_CM_EVENT_UNREACHABLE && e->param.ud.private_data_len)
		printf("unreachable: private_data_len %d '%s'\n", e->param.ud.private_data_len,
		       (const char *)e->param.ud.private_data);
	if (e->event == RDMA_CM_EVENT_CONNECT_RESPONSE && !strcmp(mode, "rc-rep-vanish"))
		_exit(0);
	if (e->event != RDMA_CM_EVENT_ESTABLISHED || ps == RDMA_PS_UDP)
		return 0;
	rdma_ack_cm_event(e);
	if (!strcmp(mode, "rc-est"))
		sleep(1); // the server exits meanwhile
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (rdma_disconnect(id)) {
		perror("rdma_disconnect");
		return 1;
	}
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED, 120000));
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_TIMEWAIT_EXIT, 10000));
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 5)
		return 2;
	ch = rdma_create_event_channel();
	if (!ch)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!strcmp(argv[1], "server"))
		return server(addr(argv[2], argv[3]), argv[4]);
	return client(addr(argv[2], argv[3]), argv[4]);
}
