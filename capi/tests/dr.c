/* Software steering through libmlx5's C API (docs/behaviour.md items 306-309, 314): the
 * calls' conventions (NULL with errno, an errno status, void), the structures read at
 * libmlx5's offsets (match parameters, the matcher layout, destination and sampler
 * attributes, modify-header actions as __be64, the VLAN header as __be32), EBUSY while in
 * use, and mlx5dv_dump_dr_domain writing to a FILE.
 * Build: cc -Wall -Werror dr.c -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include <endian.h>
#include "dv_common.h"

/* A struct mlx5dv_flow_match_parameters of n bytes. */
static struct mlx5dv_flow_match_parameters *params(const uint8_t *bytes, size_t n)
{
	struct mlx5dv_flow_match_parameters *p = calloc(1, sizeof(*p) + n);

	if (!p)
		FAIL("calloc");
	p->match_sz = n;
	memcpy(p->match_buf, bytes, n);
	return p;
}

#define EXPECT_NULL(call, err, what) do { errno = 0; void *_p = (void *)(call); \
	CHECK(!_p && errno == (err), "%s: %p, errno %d (want %d)", what, _p, errno, err); } while (0)

int main(void)
{
	struct ibv_context *ctx = dv_open_devx("mlx5_0");
	uint8_t smac_mask[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0 };
	uint8_t smac[8] = { 0x02, 0, 0, 0, 0, 0x02, 0, 0 };
	struct mlx5dv_flow_match_parameters *mask = params(smac_mask, 8), *value = params(smac, 8);

	EXPECT_NULL(mlx5dv_dr_domain_create(ctx, 3), EINVAL, "domain type 3");
	struct mlx5dv_dr_domain *rx = mlx5dv_dr_domain_create(ctx, MLX5DV_DR_DOMAIN_TYPE_NIC_RX);
	if (!rx && errno == EOPNOTSUPP)
		SKIP("no mlx5dv_dr domains (EOPNOTSUPP)");
	CHECK(rx, "mlx5dv_dr_domain_create: %s", strerror(errno));
	struct mlx5dv_dr_domain *tx = mlx5dv_dr_domain_create(ctx, MLX5DV_DR_DOMAIN_TYPE_NIC_TX);
	CHECK(tx, "a NIC TX domain: %s", strerror(errno));
	CHECK_EQ(mlx5dv_dr_domain_sync(rx, 1 << 3), EOPNOTSUPP, "sync flags 0x8");
	CHECK_EQ(mlx5dv_dr_domain_sync(rx, MLX5DV_DR_DOMAIN_SYNC_FLAGS_SW | MLX5DV_DR_DOMAIN_SYNC_FLAGS_HW), 0, "sync");
	PASS("domains and sync");

	struct mlx5dv_dr_table *root = mlx5dv_dr_table_create(rx, 0);
	struct mlx5dv_dr_table *t1 = mlx5dv_dr_table_create(rx, 1);
	CHECK(root && t1, "tables: %s", strerror(errno));
	EXPECT_NULL(mlx5dv_dr_matcher_create(t1, 0, 0x80, mask), EINVAL, "criteria 0x80");
	struct mlx5dv_dr_matcher *rm = mlx5dv_dr_matcher_create(root, 0, 1, mask);
	struct mlx5dv_dr_matcher *m = mlx5dv_dr_matcher_create(t1, 1, 1, mask);
	CHECK(rm && m, "matchers: %s", strerror(errno));
	struct mlx5dv_dr_matcher_layout layout = { .flags = MLX5DV_DR_MATCHER_LAYOUT_NUM_RULE, .log_num_of_rules_hint = 5 };
	CHECK_EQ(mlx5dv_dr_matcher_set_layout(m, &layout), 0, "a layout of 2^5 rules");
	CHECK_EQ(mlx5dv_dr_matcher_set_layout(rm, &layout), EOPNOTSUPP, "a root matcher's layout");
	layout.flags = 1 << 2;
	CHECK_EQ(mlx5dv_dr_matcher_set_layout(m, &layout), EOPNOTSUPP, "layout flags 0x4");
	PASS("tables, matchers and layouts");

	struct mlx5dv_dr_action *drop = mlx5dv_dr_action_create_drop();
	struct mlx5dv_dr_action *tag = mlx5dv_dr_action_create_tag(0x123);
	struct mlx5dv_dr_action *goto_t1 = mlx5dv_dr_action_create_dest_table(t1);
	CHECK(drop && tag && goto_t1, "actions: %s", strerror(errno));
	EXPECT_NULL(mlx5dv_dr_action_create_dest_table(root), EINVAL, "the root table as a destination");
	EXPECT_NULL(mlx5dv_dr_action_create_push_vlan(tx, htobe32(0x08000005)), EINVAL, "TPID 0x0800");
	struct mlx5dv_dr_action *push = mlx5dv_dr_action_create_push_vlan(tx, htobe32(0x81006005));
	CHECK(push, "a VLAN push: %s", strerror(errno));
	/* OUT_SMAC_47_16 set to 0x88888888, OUT_SMAC_15_0 to 0x8888. */
	__be64 set_smac[2] = { htobe64(0x1001000088888888ull), htobe64(0x1002001000008888ull) };
	struct mlx5dv_dr_action *rewrite = mlx5dv_dr_action_create_modify_header(tx, 0, sizeof(set_smac), set_smac);
	CHECK(rewrite, "a rewrite: %s", strerror(errno));
	EXPECT_NULL(mlx5dv_dr_action_create_modify_header(tx, 0, 12, set_smac), EINVAL, "12 bytes of actions");
	struct mlx5dv_dr_action_dest_attr one = { .type = MLX5DV_DR_ACTION_DEST, .dest = goto_t1 };
	struct mlx5dv_dr_action_dest_attr *dests[] = { &one };
	EXPECT_NULL(mlx5dv_dr_action_create_dest_array(rx, 1, dests), EINVAL, "a one-destination array");
	struct mlx5dv_dr_action *samples[] = { drop };
	struct mlx5dv_dr_flow_sampler_attr sattr = { .sample_ratio = 0, .default_next_table = t1,
						    .num_sample_actions = 1, .sample_actions = samples };
	EXPECT_NULL(mlx5dv_dr_action_create_flow_sampler(&sattr), EINVAL, "a sampler of ratio 0");
	EXPECT_NULL(mlx5dv_dr_action_create_dest_vport(rx, 0), EOPNOTSUPP, "a vport outside switchdev");
	PASS("action creation checks");

	struct mlx5dv_dr_action *to_t1[] = { goto_t1 }, *tag_drop[] = { tag, drop }, *drop_tag[] = { drop, tag };
	struct mlx5dv_dr_rule *r0 = mlx5dv_dr_rule_create(rm, value, 1, to_t1);
	CHECK(r0, "a root rule: %s", strerror(errno));
	EXPECT_NULL(mlx5dv_dr_rule_create(m, value, 2, drop_tag), EOPNOTSUPP, "a tag after a drop");
	struct mlx5dv_dr_rule *r1 = mlx5dv_dr_rule_create(m, value, 2, tag_drop);
	CHECK(r1, "a tag, then a drop: %s", strerror(errno));
	mlx5dv_dr_domain_allow_duplicate_rules(rx, false);
	EXPECT_NULL(mlx5dv_dr_rule_create(m, value, 2, tag_drop), EEXIST, "a duplicate once forbidden");
	PASS("rules in libmlx5's order of actions");

	FILE *f = tmpfile();
	CHECK(f, "tmpfile");
	CHECK_EQ(mlx5dv_dump_dr_domain(f, rx), 0, "mlx5dv_dump_dr_domain");
	char line[512];
	int tables = 0, rules = 0;
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		tables += !strncmp(line, "table,", 6);
		rules += !strncmp(line, "rule,", 5);
	}
	fclose(f);
	CHECK(tables == 2 && rules == 2, "the dump: %d tables, %d rules", tables, rules);
	PASS("the domain's dump");

	CHECK_EQ(mlx5dv_dr_matcher_destroy(m), EBUSY, "a matcher under a rule");
	CHECK_EQ(mlx5dv_dr_action_destroy(goto_t1), EBUSY, "an action under a rule");
	CHECK_EQ(mlx5dv_dr_table_destroy(t1), EBUSY, "a table under a matcher");
	CHECK_EQ(mlx5dv_dr_domain_destroy(rx), EBUSY, "a domain under tables");
	CHECK_EQ(mlx5dv_dr_rule_destroy(r1), 0, "destroy a rule");
	CHECK_EQ(mlx5dv_dr_rule_destroy(r0), 0, "destroy a rule");
	CHECK_EQ(mlx5dv_dr_matcher_destroy(m), 0, "destroy a matcher");
	CHECK_EQ(mlx5dv_dr_matcher_destroy(rm), 0, "destroy a matcher");
	CHECK_EQ(mlx5dv_dr_action_destroy(goto_t1), 0, "destroy the table action");
	CHECK_EQ(mlx5dv_dr_table_destroy(t1), 0, "destroy a table");
	CHECK_EQ(mlx5dv_dr_table_destroy(root), 0, "destroy a table");
	CHECK_EQ(mlx5dv_dr_action_destroy(push), 0, "destroy an action");
	CHECK_EQ(mlx5dv_dr_action_destroy(rewrite), 0, "destroy an action");
	CHECK_EQ(mlx5dv_dr_action_destroy(tag), 0, "destroy an action");
	CHECK_EQ(mlx5dv_dr_action_destroy(drop), 0, "destroy an action");
	CHECK_EQ(mlx5dv_dr_domain_destroy(rx), 0, "destroy a domain");
	CHECK_EQ(mlx5dv_dr_domain_destroy(tx), 0, "destroy a domain");
	PASS("destroyed in order, EBUSY before");
	free(mask);
	free(value);
	ibv_close_device(ctx);
	return 0;
}
