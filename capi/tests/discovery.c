/* Discovery and queries: the device list, contexts with and without DEVX, the device, port,
 * GID and P_Key queries, and what an mlx5dv query reports. */
#include "common.h"

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	CHECK(strncmp(ibv_get_device_name(dev), "mlx5_", 5) == 0, "device name %s", ibv_get_device_name(dev));
	CHECK(ibv_get_device_guid(dev) != 0, "node GUID");

	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device: %s", strerror(errno));
	CHECK(ctx->async_fd >= 0, "async fd");

	struct ibv_device_attr attr;
	CHECK_EQ(ibv_query_device(ctx, &attr), 0, "ibv_query_device");
	CHECK_EQ(attr.vendor_id, 0x02c9, "vendor_id");
	CHECK(attr.phys_port_cnt >= 1, "phys_port_cnt");
	CHECK(attr.max_qp_wr > 0 && attr.max_cqe > 0, "max_qp_wr, max_cqe");
	CHECK_EQ(attr.node_guid, ibv_get_device_guid(dev), "node_guid matches ibv_get_device_guid");

	struct ibv_device_attr_ex ex;
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &ex), 0, "ibv_query_device_ex");
	CHECK_EQ(ex.orig_attr.vendor_part_id, attr.vendor_part_id, "ibv_query_device_ex vendor_part_id");

	struct ibv_port_attr port;
	CHECK_EQ(ibv_query_port(ctx, 1, &port), 0, "ibv_query_port");
	CHECK_EQ(port.state, IBV_PORT_ACTIVE, "port state");
	CHECK(port.active_mtu >= IBV_MTU_256 && port.active_mtu <= IBV_MTU_4096, "active_mtu %d", port.active_mtu);
	CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET || port.link_layer == IBV_LINK_LAYER_INFINIBAND,
	      "link layer %d", port.link_layer);
	CHECK(ibv_query_port(ctx, 2, &port) != 0, "port 2 does not exist");
	CHECK_EQ(ibv_query_port(ctx, 1, &port), 0, "ibv_query_port");

	union ibv_gid gid;
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0, "ibv_query_gid 0");
	if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		CHECK(gid.raw[0] == 0xfe && gid.raw[1] == 0x80, "GID 0 is link-local");
		struct ibv_gid_entry e;
		CHECK_EQ(ibv_query_gid_ex(ctx, 1, 1, &e, 0), 0, "ibv_query_gid_ex 1");
		CHECK_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2, "GID 1 is RoCE v2");
		struct ibv_gid_entry table[8];
		ssize_t n = ibv_query_gid_table(ctx, table, 8, 0);
		CHECK(n >= 2, "ibv_query_gid_table: %zd", n);
		CHECK(memcmp(&table[0].gid, &gid, sizeof(gid)) == 0, "the table's GID 0 is ibv_query_gid's");
	}
	uint16_t pkey;
	CHECK_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), 0, "ibv_query_pkey");
	CHECK_EQ(ntohs(pkey), 0xffff, "default P_Key");

	struct ibv_pd *apd = ibv_alloc_pd(ctx);
	CHECK(apd, "ibv_alloc_pd");
	struct ibv_ah_attr ah_attr = { .port_num = 1, .dlid = port.lid };
	if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		struct ibv_ah *bad = ibv_create_ah(apd, &ah_attr);
		CHECK(!bad && errno == EINVAL, "a RoCE AH without a GRH is EINVAL");
		ah_attr.is_global = 1;
		ah_attr.grh.dgid = gid;
		ah_attr.grh.sgid_index = 1;
		ah_attr.grh.hop_limit = 1;
	}
	struct ibv_ah *ah = ibv_create_ah(apd, &ah_attr);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));
	CHECK_EQ(ibv_destroy_ah(ah), 0, "ibv_destroy_ah");
	CHECK_EQ(ibv_dealloc_pd(apd), 0, "ibv_dealloc_pd");

	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch && ch->fd >= 0, "ibv_create_comp_channel");
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");

	struct mlx5dv_context_attr dv_attr = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
	struct ibv_context *devx = mlx5dv_open_device(dev, &dv_attr);
	if (!devx) {
		CHECK(errno == EOPNOTSUPP, "mlx5dv_open_device(DEVX): %s", strerror(errno));
		printf("DEVX not supported by this device\n");
	} else {
		struct ibv_pd *pd = ibv_alloc_pd(devx);
		CHECK(pd, "ibv_alloc_pd on a DEVX context");
		CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
		CHECK_EQ(ibv_close_device(devx), 0, "ibv_close_device(DEVX)");
	}
	ibv_free_device_list(list);
	printf("PASS\n");
	return 0;
}
