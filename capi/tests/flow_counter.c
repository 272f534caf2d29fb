/* DEVX flow counters (docs/behaviour.md items 245-248): ALLOC_FLOW_COUNTER as a DEVX object,
 * one counter and a bulk, QUERY_FLOW_COUNTER through the object (any counter of a bulk, not
 * past it), refused bulk forms, and the destroy. Build: cc -Wall -Werror flow_counter.c
 * -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include "dv_common.h"

#define QUERY_HCA_CAP 0x100
#define ALLOC_FLOW_COUNTER 0x939
#define QUERY_FLOW_COUNTER 0x93b
#define HCA_CAP_OUT (16 + 4096)

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* An ALLOC_FLOW_COUNTER input: in the dword at byte 12, flow_counter_bulk_log_size is bits
 * 12:8 and flow_counter_bulk bits 7:0. */
static void alloc_in(uint8_t *in, unsigned log_size, unsigned mask)
{
	memset(in, 0, 16);
	in[0] = ALLOC_FLOW_COUNTER >> 8;
	in[1] = ALLOC_FLOW_COUNTER & 0xff;
	put32(in + 12, (log_size & 0x1f) << 8 | (mask & 0xff));
}

/* QUERY_FLOW_COUNTER of one counter `id` through `obj`: 0 and its packets, or the errno. */
static int query(struct mlx5dv_devx_obj *obj, uint32_t id, uint64_t *packets)
{
	uint8_t in[32] = { QUERY_FLOW_COUNTER >> 8, QUERY_FLOW_COUNTER & 0xff }, out[32];

	put32(in + 28, id);
	int rc = mlx5dv_devx_obj_query(obj, in, sizeof(in), out, sizeof(out));
	if (rc == 0)
		*packets = get64(out + 16);
	return rc;
}

int main(void)
{
	struct ibv_context *ctx = dv_open_devx("mlx5_0");
	static uint8_t caps[HCA_CAP_OUT];
	uint8_t in[16] = { QUERY_HCA_CAP >> 8, QUERY_HCA_CAP & 0xff, 0, 0, 0, 0, 0, 1 }, out[16];

	CHECK_EQ(mlx5dv_devx_general_cmd(ctx, in, sizeof(in), caps, sizeof(caps)), 0, "QUERY_HCA_CAP");
	const uint8_t *page = caps + 16;
	uint32_t max = (uint32_t)(page[0x58] << 8 | page[0x59]) << 16 | (page[0x6a] << 8 | page[0x6b]);
	unsigned masks = page[0x62], log_max = page[0x69];
	if (max == 0)
		SKIP("the device has no flow counters (max_flow_counter 0)");
	printf("ok: max_flow_counter %u, flow_counter_bulk_alloc 0x%x, log_max_flow_counter_bulk %u\n", max,
	       masks, log_max);

	alloc_in(in, 0, 0);
	struct mlx5dv_devx_obj *one = mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out));
	CHECK(one, "ALLOC_FLOW_COUNTER: %s", strerror(errno));
	uint32_t id = get32(out + 8);
	uint64_t packets = 1;
	CHECK_EQ(query(one, id, &packets), 0, "QUERY_FLOW_COUNTER of the counter");
	CHECK_EQ(packets, 0, "a new counter's packets");
	CHECK_EQ(query(one, id + 1, &packets), EINVAL, "another id through a single counter's object");
	PASS("one counter: id, zero packets, its object queries only it");

	if (log_max >= 2) {
		alloc_in(in, 2, 0);
		struct mlx5dv_devx_obj *bulk = mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out));
		CHECK(bulk, "ALLOC_FLOW_COUNTER of 4: %s", strerror(errno));
		uint32_t first = get32(out + 8);
		CHECK(first % 4 == 0, "the bulk's first id 0x%x is a multiple of 4", first);
		CHECK_EQ(query(bulk, first + 3, &packets), 0, "the bulk's last counter");
		CHECK_EQ(query(bulk, first + 4, &packets), EINVAL, "past the bulk");
		CHECK_EQ(mlx5dv_devx_obj_destroy(bulk), 0, "destroy the bulk");
		PASS("a bulk of 4: aligned, any of its counters, none past them");
	}
	alloc_in(in, 1, 1);
	CHECK(!mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out)) && errno == EREMOTEIO,
	      "both bulk forms: EREMOTEIO");
	CHECK_EQ(out[0], 0x03, "both bulk forms: BAD_PARAM status");
	if (log_max < 31) {
		alloc_in(in, log_max + 1, 0);
		CHECK(!mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out)) && errno == EREMOTEIO,
		      "a log size past log_max_flow_counter_bulk: EREMOTEIO");
	}
	PASS("refused bulks");
	CHECK_EQ(mlx5dv_devx_obj_destroy(one), 0, "destroy the counter");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	printf("PASS flow_counter\n");
	return 0;
}
