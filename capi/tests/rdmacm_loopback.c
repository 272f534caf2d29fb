/* librdmacm's resolution of a destination in 0.0.0.0/8, which the kernel's rdma_cm takes for
 * this host (cma_zero_addr, cma_resolve_loopback): an ID on no device takes the first device
 * and its port 1, a port of its own, and the source 127.0.0.1; ADDR_RESOLVED, the GIDs of the
 * two addresses (IPv4-mapped, as rdma_read_gids gives them on RoCE); the same with 127.0.0.1
 * given as the source (libfabric's verbs provider passes it so) and on a synchronous ID. On
 * RoCE such an ID is on no netdev: rdma_resolve_route fails with ENODEV
 * (cma_resolve_iboe_route) and rdma_connect, without a route, with EINVAL. */
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include "common.h"

static struct rdma_event_channel *ch;

static void expect(enum rdma_cm_event_type type, struct rdma_cm_id *id)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, 5000) == 1, "no event within 5 s");
	struct rdma_cm_event *ev;
	CHECK_EQ(rdma_get_cm_event(ch, &ev), 0, "rdma_get_cm_event");
	CHECK(ev->event == type && ev->id == id && ev->status == 0, "event %s (status %d), expected %s",
	      rdma_event_str(ev->event), ev->status, rdma_event_str(type));
	rdma_ack_cm_event(ev);
}

static void mapped(const uint8_t *gid, uint32_t ip, const char *what)
{
	uint8_t want[16] = { [10] = 0xff, [11] = 0xff };
	ip = htonl(ip);
	memcpy(&want[12], &ip, 4);
	CHECK(!memcmp(gid, want, 16), "%s: not the IPv4-mapped GID of its address", what);
}

/* What a loopback resolution leaves in the ID, and what it then refuses. */
static void check_resolved(struct rdma_cm_id *id, const char *first, uint16_t dport, int roce)
{
	CHECK(id->verbs, "the ID has a context");
	CHECK(!strcmp(ibv_get_device_name(id->verbs->device), first), "the ID's device %s, not the first, %s",
	      ibv_get_device_name(id->verbs->device), first);
	CHECK_EQ(id->port_num, 1, "its port");
	struct sockaddr_in *src = (struct sockaddr_in *)rdma_get_local_addr(id);
	struct sockaddr_in *dst = (struct sockaddr_in *)rdma_get_peer_addr(id);
	CHECK_EQ(src->sin_family, AF_INET, "the source's family");
	CHECK_EQ(ntohl(src->sin_addr.s_addr), INADDR_LOOPBACK, "the source address: 127.0.0.1");
	CHECK(rdma_get_src_port(id) != 0, "the ID holds a port");
	CHECK_EQ(dst->sin_addr.s_addr, 0, "the destination stays 0.0.0.0");
	CHECK_EQ(ntohs(rdma_get_dst_port(id)), dport, "the destination port");
	if (!roce)
		return;
	mapped(id->route.addr.addr.ibaddr.sgid.raw, INADDR_LOOPBACK, "the source GID");
	mapped(id->route.addr.addr.ibaddr.dgid.raw, 0, "the destination GID");
	CHECK_EQ(rdma_resolve_route(id, 1000), -1, "rdma_resolve_route of a loopback resolution on RoCE");
	CHECK_EQ(errno, ENODEV, "its errno");
	struct rdma_conn_param p = { .retry_count = 7 };
	CHECK_EQ(rdma_connect(id, &p), -1, "rdma_connect without a route");
	CHECK_EQ(errno, EINVAL, "its errno");
}

int main(void)
{
	ch = rdma_create_event_channel();
	if (!ch)
		SKIP("rdma_create_event_channel: %s (no RDMA CM here)", strerror(errno));
	int n = 0;
	struct ibv_context **devs = rdma_get_devices(&n);
	if (!devs || n == 0)
		SKIP("no RDMA device");
	char first[64];
	snprintf(first, sizeof(first), "%s", ibv_get_device_name(devs[0]->device));
	struct ibv_port_attr port;
	CHECK_EQ(ibv_query_port(devs[0], 1, &port), 0, "ibv_query_port");
	int roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
	rdma_free_devices(devs);

	/* No source: the wildcard is bound first, as cma_bind_addr does. */
	struct rdma_cm_id *id;
	CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0, "rdma_create_id");
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(7471) };
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&any, 1000), 0, "rdma_resolve_addr of 0.0.0.0");
	expect(RDMA_CM_EVENT_ADDR_RESOLVED, id);
	check_resolved(id, first, 7471, roce);
	CHECK_EQ(rdma_destroy_id(id), 0, "rdma_destroy_id");

	/* 127.0.0.1 as the source and another address of 0.0.0.0/8. */
	CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0, "rdma_create_id");
	struct sockaddr_in lo = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in zero_net = { .sin_family = AF_INET, .sin_port = htons(7472), .sin_addr.s_addr = htonl(0x00010203) };
	CHECK_EQ(rdma_resolve_addr(id, (struct sockaddr *)&lo, (struct sockaddr *)&zero_net, 1000), 0,
		 "rdma_resolve_addr of 0.1.2.3 from 127.0.0.1");
	expect(RDMA_CM_EVENT_ADDR_RESOLVED, id);
	CHECK_EQ(((struct sockaddr_in *)rdma_get_peer_addr(id))->sin_addr.s_addr, zero_net.sin_addr.s_addr,
		 "the destination stays 0.1.2.3");
	CHECK(id->verbs, "the ID has a context");
	CHECK_EQ(ntohl(((struct sockaddr_in *)rdma_get_local_addr(id))->sin_addr.s_addr), INADDR_LOOPBACK,
		 "the source address: 127.0.0.1");
	CHECK_EQ(rdma_destroy_id(id), 0, "rdma_destroy_id");

	/* A synchronous ID: the call returns once resolved. */
	CHECK_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0, "rdma_create_id without a channel");
	any.sin_port = htons(7473);
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&any, 1000), 0, "rdma_resolve_addr of 0.0.0.0 (synchronous)");
	check_resolved(id, first, 7473, roce);
	CHECK_EQ(rdma_destroy_id(id), 0, "rdma_destroy_id");

	rdma_destroy_event_channel(ch);
	printf("rdmacm_loopback: 0.0.0.0/8 resolves to %s and 127.0.0.1%s\n", first,
	       roce ? "; its route: ENODEV on RoCE" : "");
	return 0;
}
