/* What libibverbs and librdmacm answer without a device, value for value: the names of their
 * enums (one below and past each enum too) and the rate conversions. It runs, and must pass,
 * on the real libraries as on the shim. RDMA CM events 16 and 17 are left out: librdmacm
 * names them only from the release that added rdma_resolve_addrinfo on. */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <string.h>

struct name { int value; const char *text; };

static int check(const char *what, const char *(*f)(int), const struct name *n, size_t count)
{
	int bad = 0;

	for (size_t i = 0; i < count; i++) {
		const char *got = f(n[i].value);

		if (!got || strcmp(got, n[i].text)) {
			fprintf(stderr, "%s(%d): \"%s\", expected \"%s\"\n", what, n[i].value, got ? got : "(null)", n[i].text);
			bad = 1;
		}
	}
	return bad;
}

static const struct name port_names[] = {
	{ -1, "unknown" },
	{ 0, "no state change (NOP)" },
	{ 1, "down" },
	{ 2, "init" },
	{ 3, "armed" },
	{ 4, "active" },
	{ 5, "active defer" },
	{ 6, "unknown" },
	{ 7, "unknown" },
};

static const struct name node_names[] = {
	{ -1, "unknown" },
	{ 0, "unknown" },
	{ 1, "InfiniBand channel adapter" },
	{ 2, "InfiniBand switch" },
	{ 3, "InfiniBand router" },
	{ 4, "iWARP NIC" },
	{ 5, "usNIC" },
	{ 6, "usNIC UDP" },
	{ 7, "unspecified" },
	{ 8, "unknown" },
};

static const struct name ev_names[] = {
	{ -1, "unknown" },
	{ 0, "CQ error" },
	{ 1, "local work queue catastrophic error" },
	{ 2, "invalid request local work queue error" },
	{ 3, "local access violation work queue error" },
	{ 4, "communication established" },
	{ 5, "send queue drained" },
	{ 6, "path migrated" },
	{ 7, "path migration request error" },
	{ 8, "local catastrophic error" },
	{ 9, "port active" },
	{ 10, "port error" },
	{ 11, "LID change" },
	{ 12, "P_Key change" },
	{ 13, "SM change" },
	{ 14, "SRQ catastrophic error" },
	{ 15, "SRQ limit reached" },
	{ 16, "last WQE reached" },
	{ 17, "client reregistration" },
	{ 18, "GID table change" },
	{ 19, "WQ fatal" },
	{ 20, "unknown" },
	{ 21, "unknown" },
	{ 22, "unknown" },
	{ 23, "unknown" },
	{ 24, "unknown" },
};

static const struct name wc_names[] = {
	{ -1, "unknown" },
	{ 0, "success" },
	{ 1, "local length error" },
	{ 2, "local QP operation error" },
	{ 3, "local EE context operation error" },
	{ 4, "local protection error" },
	{ 5, "Work Request Flushed Error" },
	{ 6, "memory management operation error" },
	{ 7, "bad response error" },
	{ 8, "local access error" },
	{ 9, "remote invalid request error" },
	{ 10, "remote access error" },
	{ 11, "remote operation error" },
	{ 12, "transport retry counter exceeded" },
	{ 13, "RNR retry counter exceeded" },
	{ 14, "local RDD violation error" },
	{ 15, "remote invalid RD request" },
	{ 16, "aborted error" },
	{ 17, "invalid EE context number" },
	{ 18, "invalid EE context state" },
	{ 19, "fatal error" },
	{ 20, "response timeout error" },
	{ 21, "general error" },
	{ 22, "TM error" },
	{ 23, "TM software rendezvous" },
	{ 24, "unknown" },
};

static const char *port_str(int v)
{
	return ibv_port_state_str((enum ibv_port_state)v);
}

static const char *node_str(int v)
{
	return ibv_node_type_str((enum ibv_node_type)v);
}

static const char *ev_str(int v)
{
	return ibv_event_type_str((enum ibv_event_type)v);
}

static const char *wc_str(int v)
{
	return ibv_wc_status_str((enum ibv_wc_status)v);
}

struct pair { int in; int out; };

static int check_int(const char *what, int (*f)(int), const struct pair *p, size_t count)
{
	int bad = 0;

	for (size_t i = 0; i < count; i++) {
		int got = f(p[i].in);

		if (got != p[i].out) {
			fprintf(stderr, "%s(%d): %d, expected %d\n", what, p[i].in, got, p[i].out);
			bad = 1;
		}
	}
	return bad;
}

static const struct pair rate_mult[] = {
	{ -1, -1 },
	{ 0, -1 },
	{ 1, -1 },
	{ 2, 1 },
	{ 3, 4 },
	{ 4, 12 },
	{ 5, 2 },
	{ 6, 8 },
	{ 7, 16 },
	{ 8, 24 },
	{ 9, 32 },
	{ 10, 48 },
	{ 11, -1 },
	{ 12, -1 },
	{ 13, -1 },
	{ 14, -1 },
	{ 15, -1 },
	{ 16, -1 },
	{ 17, -1 },
	{ 18, -1 },
	{ 19, 11 },
	{ 20, 20 },
	{ 21, 160 },
	{ 22, 240 },
	{ 23, 320 },
	{ 24, 480 },
};

static const struct pair rate_mbps[] = {
	{ -1, -1 },
	{ 0, -1 },
	{ 1, -1 },
	{ 2, 2500 },
	{ 3, 10000 },
	{ 4, 30000 },
	{ 5, 5000 },
	{ 6, 20000 },
	{ 7, 40000 },
	{ 8, 60000 },
	{ 9, 80000 },
	{ 10, 120000 },
	{ 11, 14062 },
	{ 12, 56250 },
	{ 13, 112500 },
	{ 14, 168750 },
	{ 15, 25781 },
	{ 16, 103125 },
	{ 17, 206250 },
	{ 18, 309375 },
	{ 19, 28125 },
	{ 20, 53125 },
	{ 21, 425000 },
	{ 22, 637500 },
	{ 23, 850000 },
	{ 24, 1275000 },
};

static const struct pair mult_rate[] = {
	{ -1, 0 },
	{ 0, 0 },
	{ 1, 2 },
	{ 2, 5 },
	{ 3, 0 },
	{ 4, 3 },
	{ 5, 0 },
	{ 6, 0 },
	{ 8, 6 },
	{ 10, 0 },
	{ 11, 19 },
	{ 480, 24 },
	{ 12, 4 },
	{ 14, 0 },
	{ 16, 7 },
	{ 20, 20 },
	{ 24, 8 },
	{ 30, 0 },
	{ 32, 9 },
	{ 40, 0 },
	{ 48, 10 },
	{ 56, 0 },
	{ 64, 0 },
	{ 80, 0 },
	{ 96, 0 },
	{ 100, 0 },
	{ 112, 0 },
	{ 120, 0 },
	{ 160, 21 },
	{ 168, 0 },
	{ 200, 0 },
	{ 240, 22 },
	{ 272, 0 },
	{ 300, 0 },
	{ 320, 23 },
	{ 400, 0 },
	{ 600, 0 },
	{ 700, 0 },
	{ 800, 0 },
	{ 1200, 0 },
	{ 2, 5 },
};

static const struct pair mbps_rate[] = {
	{ -1, 0 },
	{ 0, 0 },
	{ 1, 0 },
	{ 2500, 2 },
	{ 5000, 5 },
	{ 10000, 3 },
	{ 14062, 11 },
	{ 20000, 6 },
	{ 25000, 0 },
	{ 25781, 15 },
	{ 30000, 4 },
	{ 40000, 7 },
	{ 50000, 0 },
	{ 53125, 20 },
	{ 56250, 12 },
	{ 60000, 8 },
	{ 80000, 9 },
	{ 100000, 0 },
	{ 103125, 16 },
	{ 106250, 0 },
	{ 112500, 13 },
	{ 120000, 10 },
	{ 168750, 14 },
	{ 200000, 0 },
	{ 212500, 0 },
	{ 225000, 0 },
	{ 300000, 0 },
	{ 400000, 0 },
	{ 600000, 0 },
	{ 800000, 0 },
	{ 1200000, 0 },
	{ 2400000, 0 },
	{ 2499, 0 },
};

static const struct name cm_names[] = {
	{ -1, "UNKNOWN EVENT" },
	{ 0, "RDMA_CM_EVENT_ADDR_RESOLVED" },
	{ 1, "RDMA_CM_EVENT_ADDR_ERROR" },
	{ 2, "RDMA_CM_EVENT_ROUTE_RESOLVED" },
	{ 3, "RDMA_CM_EVENT_ROUTE_ERROR" },
	{ 4, "RDMA_CM_EVENT_CONNECT_REQUEST" },
	{ 5, "RDMA_CM_EVENT_CONNECT_RESPONSE" },
	{ 6, "RDMA_CM_EVENT_CONNECT_ERROR" },
	{ 7, "RDMA_CM_EVENT_UNREACHABLE" },
	{ 8, "RDMA_CM_EVENT_REJECTED" },
	{ 9, "RDMA_CM_EVENT_ESTABLISHED" },
	{ 10, "RDMA_CM_EVENT_DISCONNECTED" },
	{ 11, "RDMA_CM_EVENT_DEVICE_REMOVAL" },
	{ 12, "RDMA_CM_EVENT_MULTICAST_JOIN" },
	{ 13, "RDMA_CM_EVENT_MULTICAST_ERROR" },
	{ 14, "RDMA_CM_EVENT_ADDR_CHANGE" },
	{ 15, "RDMA_CM_EVENT_TIMEWAIT_EXIT" },
};

static int to_mult(int r)
{
	return ibv_rate_to_mult((enum ibv_rate)r);
}

static int to_mbps(int r)
{
	return ibv_rate_to_mbps((enum ibv_rate)r);
}

static int from_mult(int m)
{
	return (int)mult_to_ibv_rate(m);
}

static int from_mbps(int m)
{
	return (int)mbps_to_ibv_rate(m);
}

static const char *cm_str(int v)
{
	return rdma_event_str((enum rdma_cm_event_type)v);
}
int main(void)
{
	int bad = 0;

	bad |= check("ibv_port_state_str", port_str, port_names, sizeof(port_names) / sizeof(port_names[0]));
	bad |= check("ibv_node_type_str", node_str, node_names, sizeof(node_names) / sizeof(node_names[0]));
	bad |= check("ibv_event_type_str", ev_str, ev_names, sizeof(ev_names) / sizeof(ev_names[0]));
	bad |= check("ibv_wc_status_str", wc_str, wc_names, sizeof(wc_names) / sizeof(wc_names[0]));
	bad |= check("rdma_event_str", cm_str, cm_names, sizeof(cm_names) / sizeof(cm_names[0]));
	bad |= check_int("ibv_rate_to_mult", to_mult, rate_mult, sizeof(rate_mult) / sizeof(rate_mult[0]));
	bad |= check_int("ibv_rate_to_mbps", to_mbps, rate_mbps, sizeof(rate_mbps) / sizeof(rate_mbps[0]));
	bad |= check_int("mult_to_ibv_rate", from_mult, mult_rate, sizeof(mult_rate) / sizeof(mult_rate[0]));
	bad |= check_int("mbps_to_ibv_rate", from_mbps, mbps_rate, sizeof(mbps_rate) / sizeof(mbps_rate[0]));
	if (!bad)
		printf("enum names and rates: every value as libibverbs and librdmacm give it\n");
	return bad;
}
