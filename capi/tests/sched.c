/* NIC scheduling elements through libmlx5's API (docs/behaviour.md items 266-269):
 * mlx5dv_sched_node_create / _leaf_create / _modify / _destroy with libmlx5's attribute
 * checks (EINVAL), a tree of a root, a weighted node and a leaf, and an RC QP joining the
 * leaf with mlx5dv_modify_qp_sched_elem (and a UD QP refused a responder group).
 * Build: cc -Wall -Werror sched.c -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include "dv_common.h"

int main(void)
{
	struct ibv_context *ctx = dv_open_devx("mlx5_0");
	struct mlx5dv_sched_attr root_attr = { 0 };
	struct mlx5dv_sched_node *root = mlx5dv_sched_node_create(ctx, &root_attr);

	if (!root && errno == EOPNOTSUPP)
		SKIP("the device has no NIC scheduling (EOPNOTSUPP)");
	CHECK(root, "mlx5dv_sched_node_create(root): %s", strerror(errno));
	PASS("a root node");

	/* libmlx5's sched_attr_valid: each EINVAL, before any command. */
	struct mlx5dv_sched_attr bad = { .comp_mask = 1, .parent = root };
	errno = 0;
	CHECK(!mlx5dv_sched_node_create(ctx, &bad) && errno == EINVAL, "comp_mask 1: errno %d", errno);
	bad = (struct mlx5dv_sched_attr){ .flags = 1 << 2, .parent = root };
	errno = 0;
	CHECK(!mlx5dv_sched_node_create(ctx, &bad) && errno == EINVAL, "an unknown flag: errno %d", errno);
	bad = (struct mlx5dv_sched_attr){ .flags = MLX5DV_SCHED_ELEM_ATTR_FLAGS_BW_SHARE, .bw_share = 1 };
	errno = 0;
	CHECK(!mlx5dv_sched_node_create(ctx, &bad) && errno == EINVAL, "a root with flags: errno %d", errno);
	bad = (struct mlx5dv_sched_attr){ 0 };
	errno = 0;
	CHECK(!mlx5dv_sched_leaf_create(ctx, &bad) && errno == EINVAL, "a leaf without a parent: errno %d", errno);
	errno = 0;
	CHECK(!mlx5dv_sched_node_create(ctx, NULL) && errno == EINVAL, "NULL attributes: errno %d", errno);
	PASS("libmlx5's attribute checks are EINVAL");

	uint32_t both = MLX5DV_SCHED_ELEM_ATTR_FLAGS_BW_SHARE | MLX5DV_SCHED_ELEM_ATTR_FLAGS_MAX_AVG_BW;
	struct mlx5dv_sched_attr node_attr = { .parent = root, .flags = both, .bw_share = 2, .max_avg_bw = 10 };
	struct mlx5dv_sched_node *node = mlx5dv_sched_node_create(ctx, &node_attr);
	CHECK(node, "a weighted node: %s", strerror(errno));
	node_attr.bw_share = 1;
	node_attr.max_avg_bw = 4;
	CHECK_EQ(mlx5dv_sched_node_modify(node, &node_attr), 0, "mlx5dv_sched_node_modify");
	struct mlx5dv_sched_attr leaf_attr = { .parent = node };
	struct mlx5dv_sched_leaf *leaf = mlx5dv_sched_leaf_create(ctx, &leaf_attr);
	CHECK(leaf, "a leaf under it: %s", strerror(errno));
	leaf_attr.flags = both;
	leaf_attr.bw_share = 3;
	leaf_attr.max_avg_bw = 3;
	CHECK_EQ(mlx5dv_sched_leaf_modify(leaf, &leaf_attr), 0, "mlx5dv_sched_leaf_modify");
	PASS("a node and a leaf made and modified");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq, "PD and CQ: %s", strerror(errno));
	struct ibv_qp *a = dv_qp(ctx, pd, cq), *b = dv_qp(ctx, pd, cq);
	dv_connect(ctx, a, b);
	dv_connect(ctx, b, a);
	CHECK_EQ(mlx5dv_modify_qp_sched_elem(a, leaf, leaf), 0, "an RC QP in RTS joins the leaf both ways");
	CHECK_EQ(mlx5dv_modify_qp_sched_elem(a, NULL, NULL), 0, "and leaves it");
	struct ibv_qp_init_attr ud_attr = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
					    .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
						     .max_recv_sge = 1 } };
	struct ibv_qp *ud = ibv_create_qp(pd, &ud_attr);
	CHECK(ud, "a UD QP: %s", strerror(errno));
	CHECK_EQ(mlx5dv_modify_qp_sched_elem(ud, leaf, leaf), EINVAL, "a UD QP with a responder group");
	CHECK_EQ(mlx5dv_modify_qp_sched_elem(ud, leaf, NULL), EOPNOTSUPP, "a UD QP in RESET");
	PASS("mlx5dv_modify_qp_sched_elem");

	CHECK_EQ(ibv_destroy_qp(ud), 0, "ibv_destroy_qp(UD)");
	CHECK_EQ(ibv_destroy_qp(a), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(b), 0, "ibv_destroy_qp");
	CHECK_EQ(mlx5dv_sched_leaf_destroy(leaf), 0, "mlx5dv_sched_leaf_destroy");
	CHECK_EQ(mlx5dv_sched_node_destroy(node), 0, "mlx5dv_sched_node_destroy");
	CHECK_EQ(mlx5dv_sched_node_destroy(root), 0, "mlx5dv_sched_node_destroy(root)");
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	PASS("destroyed");
	return 0;
}
