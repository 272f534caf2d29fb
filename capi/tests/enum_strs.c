/* The names libibverbs gives its enums (enum_strs.c), value for value, one below and past
 * each enum too. Needs no device: it runs, and must pass, on the real libraries as on the
 * shim. */
#include <infiniband/verbs.h>
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

int main(void)
{
	int bad = 0;

	bad |= check("ibv_port_state_str", port_str, port_names, sizeof(port_names) / sizeof(port_names[0]));
	bad |= check("ibv_node_type_str", node_str, node_names, sizeof(node_names) / sizeof(node_names[0]));
	bad |= check("ibv_event_type_str", ev_str, ev_names, sizeof(ev_names) / sizeof(ev_names[0]));
	bad |= check("ibv_wc_status_str", wc_str, wc_names, sizeof(wc_names) / sizeof(wc_names[0]));
	if (!bad)
		printf("enum names: every value as libibverbs names it\n");
	return bad;
}
