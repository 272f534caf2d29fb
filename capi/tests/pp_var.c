/* Packet pacing entries, VARs and a QP's LAG port. mlx5dv_pp_alloc: shared entries for equal
 * rates (across contexts), dedicated ones apart, EINVAL for rate 0, EOPNOTSUPP for unknown
 * flags. mlx5dv_alloc_var: where the device has virtio emulation, a page whose mmap_off maps on
 * the command fd; elsewhere EPROTONOSUPPORT. mlx5dv_query_qp_lag_port: EOPNOTSUPP on a device
 * without LAG. A real card may differ in which of these it has; each part says so. */
#include <sys/mman.h>
#include "common.h"

static struct mlx5dv_pp *pp(struct ibv_context *ctx, uint32_t rate_kbps, uint32_t flags)
{
	uint8_t c[48] = { 0 };
	uint32_t be = htobe32(rate_kbps);
	memcpy(c, &be, 4);
	return mlx5dv_pp_alloc(ctx, sizeof(c), c, flags);
}

static void packet_pacing(struct ibv_device *dev)
{
	struct mlx5dv_context_attr attr = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
	struct ibv_context *ctx = mlx5dv_open_device(dev, &attr);
	if (!ctx) {
		printf("packet pacing: no DEVX context (%s), skipped\n", strerror(errno));
		return;
	}
	struct mlx5dv_pp *a = pp(ctx, 100, 0);
	if (!a && (errno == EOPNOTSUPP || errno == EPROTONOSUPPORT)) {
		printf("packet pacing: not supported (%s), skipped\n", strerror(errno));
		ibv_close_device(ctx);
		return;
	}
	CHECK(a, "mlx5dv_pp_alloc: %s", strerror(errno));
	CHECK(a->index >= 1, "index %u: entry 0 is the unlimited rate", a->index);
	struct mlx5dv_pp *b = pp(ctx, 100, 0);
	CHECK(b && b->index == a->index, "an equal rate shares the entry");
	struct ibv_context *other = mlx5dv_open_device(dev, &attr);
	CHECK(other, "a second DEVX context");
	struct mlx5dv_pp *o = pp(other, 100, 0);
	CHECK(o && o->index == a->index, "a shared entry spans contexts");
	struct mlx5dv_pp *d = pp(ctx, 100, MLX5DV_PP_ALLOC_FLAGS_DEDICATED_INDEX);
	CHECK(d && d->index != a->index, "a dedicated entry is apart");
	CHECK(!pp(ctx, 0, 0) && errno == EINVAL, "rate 0: errno %d", errno);
	CHECK(!pp(ctx, 100, 1u << 5) && errno == EOPNOTSUPP, "unknown flags: errno %d", errno);
	printf("packet pacing: shared index %u, dedicated %u\n", a->index, d->index);
	mlx5dv_pp_free(o);
	CHECK_EQ(ibv_close_device(other), 0, "close the second context");
	mlx5dv_pp_free(d);
	mlx5dv_pp_free(b);
	mlx5dv_pp_free(a);
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
}

static void var(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device");
	CHECK(!mlx5dv_alloc_var(ctx, 1u << 4) && errno == EOPNOTSUPP, "unknown flags: errno %d", errno);
	struct mlx5dv_var *v = mlx5dv_alloc_var(ctx, 0);
	if (!v) {
		CHECK(errno == EPROTONOSUPPORT || errno == EOPNOTSUPP, "mlx5dv_alloc_var: %s", strerror(errno));
		printf("VAR: none on this device (%s)\n", strerror(errno));
		CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
		return;
	}
	struct mlx5dv_var *w = mlx5dv_alloc_var(ctx, 0);
	CHECK(w && w->page_id != v->page_id, "a second VAR has a page of its own");
	void *m = mmap(NULL, v->length, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->cmd_fd, v->mmap_off);
	CHECK(m != MAP_FAILED, "mmap of the VAR at 0x%llx: %s", (unsigned long long)v->mmap_off, strerror(errno));
	CHECK_EQ(munmap(m, v->length), 0, "munmap");
	printf("VAR: page %u at mmap offset 0x%llx, %u bytes\n", v->page_id, (unsigned long long)v->mmap_off, v->length);
	mlx5dv_free_var(w);
	mlx5dv_free_var(v);
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
}

static void lag(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device");
	struct mlx5dv_context dv = { .comp_mask = MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS };
	CHECK_EQ(mlx5dv_query_device(ctx, &dv), 0, "mlx5dv_query_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(pd && cq, "PD and CQ");
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	CHECK(qp, "ibv_create_qp");
	uint8_t port = 0, active = 0;
	int rc = mlx5dv_query_qp_lag_port(qp, &port, &active);
	if ((dv.comp_mask & MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS) && dv.num_lag_ports > 1) {
		printf("LAG: %u ports, query answers %d (not checked: a LAG device)\n", dv.num_lag_ports, rc);
	} else {
		CHECK_EQ(rc, EOPNOTSUPP, "mlx5dv_query_qp_lag_port without LAG");
		CHECK_EQ(mlx5dv_modify_qp_lag_port(qp, 2), EOPNOTSUPP, "mlx5dv_modify_qp_lag_port without LAG");
		printf("LAG: none, EOPNOTSUPP\n");
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	packet_pacing(dev);
	var(dev);
	lag(dev);
	ibv_free_device_list(list);
	printf("PASS\n");
	return 0;
}
