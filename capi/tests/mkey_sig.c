/* Signature mkeys through the C API (docs/behaviour.md items 8, 12, 45–48):
 *  - mlx5dv_create_mkey rounds max_entries 5 up to 8 and writes it back;
 *  - UPDATE_TAG succeeds when the kernel reports tag update and fails with EOPNOTSUPP when it
 *    does not (on the simulator: profile cx6dx vs cx6dx-no-update-tag, MLX5SIM_PROFILE);
 *  - a T10-DIF wire-domain mkey configured with mlx5dv_wr_mkey_configure and its setters
 *    inserts PI on an RDMA WRITE between two loopback QPs;
 *  - writing the wire bytes back into a receiving signature mkey with a corrupted block makes
 *    mlx5dv_mkey_check report the first failing check: guard before app tag before ref tag.
 * Build: cc -Wall -Werror mkey_sig.c -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include "dv_common.h"

#define BLOCK 512
#define BLOCKS 4
#define DATA (BLOCK * BLOCKS)
#define WIRE ((BLOCK + 8) * BLOCKS)
#define APP 0x0a0a
#define REF 200

static const int ALL_ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

/* Where block i's 8 PI bytes (guard, app tag, ref tag; big-endian) start on the wire. */
static size_t pi(int i)
{
	return (size_t)(BLOCK + 8) * i + BLOCK;
}

static uint32_t be(const uint8_t *p, int n)
{
	uint32_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Configure `mkey` on `qp` over `mr`: access flags, a one-entry layout and a T10-DIF wire
 * domain (CRC guard, app tag APP, ref tag REF counting up per block). */
static void configure(struct ibv_qp *qp, struct ibv_cq *cq, struct mlx5dv_mkey *mkey, struct ibv_mr *mr,
		      uint64_t wr_id)
{
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	struct mlx5dv_qp_ex *dqp = mlx5dv_qp_ex_from_ibv_qp_ex(qpx);
	struct mlx5dv_sig_t10dif dif = {
		.bg_type = MLX5DV_SIG_T10DIF_CRC, .bg = 0, .app_tag = APP, .ref_tag = REF,
		.flags = MLX5DV_SIG_T10DIF_FLAG_REF_REMAP,
	};
	struct mlx5dv_sig_block_domain wire = {
		.sig_type = MLX5DV_SIG_TYPE_T10DIF, .sig.dif = &dif, .block_size = MLX5DV_BLOCK_SIZE_512,
	};
	struct mlx5dv_sig_block_attr sig = { .mem = NULL, .wire = &wire, .check_mask = 0xff };
	struct mlx5dv_mkey_conf_attr conf = { 0 };
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = (uint32_t)mr->length, .lkey = mr->lkey };

	CHECK(qpx && dqp, "ibv_qp_to_qp_ex / mlx5dv_qp_ex_from_ibv_qp_ex");
	ibv_wr_start(qpx);
	qpx->wr_id = wr_id;
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	mlx5dv_wr_mkey_configure(dqp, mkey, 3, &conf);
	mlx5dv_wr_set_mkey_access_flags(dqp, ALL_ACCESS);
	mlx5dv_wr_set_mkey_layout_list(dqp, 1, &sge);
	mlx5dv_wr_set_mkey_sig_block(dqp, &sig);
	int rc = ibv_wr_complete(qpx);
	CHECK(rc == 0, "configure the signature mkey: ibv_wr_complete: %s", strerror(rc));
	dv_ok_cqe(cq, wr_id, MLX5DV_WC_UMR, "configure completion (MLX5DV_WC_UMR)");
}

/* UPDATE_TAG follows the kernel's tag-update support (item 8). */
static void update_tag(struct ibv_pd *pd)
{
	const char *profile = getenv("MLX5SIM_PROFILE");
	struct mlx5dv_mkey_init_attr a = {
		.pd = pd,
		.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT | MLX5DV_MKEY_INIT_ATTR_FLAGS_UPDATE_TAG,
		.max_entries = 4,
	};
	struct mlx5dv_mkey *m = mlx5dv_create_mkey(&a);
	int err = errno;

	if (profile && strstr(profile, "no-update-tag")) {
		CHECK(!m, "UPDATE_TAG without kernel tag update: expected a failure, got an mkey");
		CHECK_EQ(err, EOPNOTSUPP, "UPDATE_TAG without kernel tag update: errno");
		PASS("UPDATE_TAG fails with EOPNOTSUPP (kernel without tag update)");
	} else if (profile) {
		CHECK(m, "UPDATE_TAG with kernel tag update: %s", strerror(err));
		PASS("UPDATE_TAG mkey created");
	} else {
		/* A real host: either answer is legal, depending on its kernel. */
		CHECK(m || err == EOPNOTSUPP, "UPDATE_TAG: %s (expected success or EOPNOTSUPP)", strerror(err));
		printf("ok: UPDATE_TAG %s\n", m ? "mkey created" : "refused with EOPNOTSUPP (no kernel tag update)");
	}
	if (m)
		CHECK(mlx5dv_destroy_mkey(m) == 0, "destroy the UPDATE_TAG mkey");
}

/* Write `wire` into the server's signature mkey, let the server's CQ be polled (the provider
 * consumes the signature-error CQE there), and return mkey_check's answer. */
static struct mlx5dv_mkey_err rx(struct ibv_qp *qpa, struct ibv_cq *cqa, struct ibv_cq *cqs, struct ibv_mr *src,
				 struct mlx5dv_mkey *mkey, const char *what)
{
	struct mlx5dv_mkey_err err, again;
	int rc = dv_write(qpa, 0x62, src->lkey, (uintptr_t)src->addr, WIRE, mkey->rkey, 0);

	CHECK(rc == 0, "%s: RDMA WRITE into the signature mkey: %s", what, strerror(rc));
	dv_ok_cqe(cqa, 0x62, IBV_WC_RDMA_WRITE, what);
	dv_no_cqe(cqs, what);
	rc = mlx5dv_mkey_check(mkey, &err);
	CHECK(rc == 0, "%s: mlx5dv_mkey_check: %s", what, strerror(rc));
	rc = mlx5dv_mkey_check(mkey, &again);
	CHECK(rc == 0 && again.err_type == MLX5DV_MKEY_NO_ERR, "%s: the error is reported once", what);
	return err;
}

static void expect_err(struct mlx5dv_mkey_err e, int type, uint64_t expected, uint64_t actual, uint64_t offset,
		       const char *what)
{
	char name[160];

	snprintf(name, sizeof(name), "%s: err_type", what);
	CHECK_EQ(e.err_type, type, name);
	snprintf(name, sizeof(name), "%s: expected_value", what);
	CHECK_EQ(e.err.sig.expected_value, expected, name);
	snprintf(name, sizeof(name), "%s: actual_value", what);
	CHECK_EQ(e.err.sig.actual_value, actual, name);
	snprintf(name, sizeof(name), "%s: offset", what);
	CHECK_EQ(e.err.sig.offset, offset, name);
	PASS(what);
}

int main(void)
{
	struct ibv_context *ctx = dv_open_devx("mlx5_0");
	struct mlx5dv_context dv = dv_caps(ctx);

	if (!(dv.comp_mask & MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD) ||
	    !(dv.sig_caps.block_prot & MLX5DV_SIG_PROT_CAP_T10DIF) ||
	    !(dv.sig_caps.t10dif_bg & MLX5DV_SIG_T10DIF_BG_CAP_CRC) ||
	    !(dv.sig_caps.block_size & MLX5DV_BLOCK_SIZE_CAP_512))
		SKIP("the device has no T10-DIF (CRC guard, 512-byte blocks) signature offload");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd: %s", strerror(errno));

	/* max_entries 5 is rounded up to a multiple of 4 and written back (item 12). */
	struct mlx5dv_mkey_init_attr ma = {
		.pd = pd,
		.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT | MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE,
		.max_entries = 5,
	};
	struct mlx5dv_mkey *smkey = mlx5dv_create_mkey(&ma);
	CHECK(smkey, "mlx5dv_create_mkey(BLOCK_SIGNATURE, 5 entries): %s", strerror(errno));
	CHECK_EQ(ma.max_entries, 8, "max_entries written back");
	CHECK_EQ(smkey->lkey, smkey->rkey, "mkey lkey == rkey");
	PASS("max_entries 5 rounded to 8");

	update_tag(pd);

	struct ibv_cq *cqa = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cqs = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cqa && cqs, "ibv_create_cq: %s", strerror(errno));
	struct ibv_qp *qpa = dv_qp(ctx, pd, cqa);
	struct ibv_qp *qps = dv_qp(ctx, pd, cqs);
	dv_connect(ctx, qpa, qps);
	dv_connect(ctx, qps, qpa);

	/* The client's data, sent through its signature mkey: the wire gets T10-DIF PI. */
	uint8_t *cdata, *swire, *sdata, *cwire;
	struct ibv_mr *cdata_mr = dv_region(pd, DATA, IBV_ACCESS_LOCAL_WRITE, &cdata);
	for (size_t i = 0; i < DATA; i++)
		cdata[i] = dv_pattern(i, 11);
	struct ibv_mr *swire_mr = dv_region(pd, WIRE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &swire);
	configure(qpa, cqa, smkey, cdata_mr, 0x51);
	int rc = dv_write(qpa, 0x61, smkey->lkey, 0, DATA, swire_mr->rkey, (uintptr_t)swire);
	CHECK(rc == 0, "RDMA WRITE from the signature mkey: %s", strerror(rc));
	dv_ok_cqe(cqa, 0x61, IBV_WC_RDMA_WRITE, "RDMA WRITE from the signature mkey");
	for (int b = 0; b < BLOCKS; b++) {
		CHECK(memcmp(swire + (size_t)(BLOCK + 8) * b, cdata + (size_t)BLOCK * b, BLOCK) == 0,
		      "wire block %d: data bytes", b);
		CHECK_EQ(be(swire + pi(b) + 2, 2), APP, "wire PI: app tag");
		CHECK_EQ(be(swire + pi(b) + 4, 4), REF + b, "wire PI: ref tag (REF_REMAP)");
	}
	PASS("T10-DIF PI inserted on the wire (app tag, remapped ref tag)");
	struct mlx5dv_mkey_err none;
	CHECK(mlx5dv_mkey_check(smkey, &none) == 0 && none.err_type == MLX5DV_MKEY_NO_ERR,
	      "mkey_check of the sending mkey: no error");

	/* The server receives wire bytes into its own signature mkey over sdata. */
	struct ibv_mr *sdata_mr = dv_region(pd, DATA, IBV_ACCESS_LOCAL_WRITE, &sdata);
	struct ibv_mr *cwire_mr = dv_region(pd, WIRE, IBV_ACCESS_LOCAL_WRITE, &cwire);
	struct mlx5dv_mkey_init_attr ra = {
		.pd = pd,
		.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT | MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE,
		.max_entries = 4,
	};
	struct mlx5dv_mkey *rmkey = mlx5dv_create_mkey(&ra);
	CHECK(rmkey, "mlx5dv_create_mkey (receiver): %s", strerror(errno));

	/* Intact PI: no error, and the data arrives with the PI stripped. */
	configure(qps, cqs, rmkey, sdata_mr, 0x52);
	memcpy(cwire, swire, WIRE);
	struct mlx5dv_mkey_err e = rx(qpa, cqa, cqs, cwire_mr, rmkey, "intact PI");
	CHECK_EQ(e.err_type, MLX5DV_MKEY_NO_ERR, "intact PI: err_type");
	CHECK(memcmp(sdata, cdata, DATA) == 0, "intact PI: the data arrives with the PI stripped");
	PASS("intact PI: no error, PI stripped");

	/* Guard and app tag wrong in block 2: the guard is reported. */
	configure(qps, cqs, rmkey, sdata_mr, 0x53);
	memcpy(cwire, swire, WIRE);
	cwire[pi(2)] ^= 0x80;
	cwire[pi(2) + 3] ^= 1;
	uint32_t guard2 = be(swire + pi(2), 2);
	e = rx(qpa, cqa, cqs, cwire_mr, rmkey, "guard and app tag wrong in block 2");
	expect_err(e, MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD, guard2, guard2 ^ 0x8000, 2 * (BLOCK + 8),
		   "guard before app tag (block 2)");

	/* App and ref tag wrong in block 1: the app tag is reported. */
	configure(qps, cqs, rmkey, sdata_mr, 0x54);
	memcpy(cwire, swire, WIRE);
	cwire[pi(1) + 3] ^= 0x10;
	cwire[pi(1) + 7] ^= 1;
	e = rx(qpa, cqa, cqs, cwire_mr, rmkey, "app and ref tag wrong in block 1");
	expect_err(e, MLX5DV_MKEY_SIG_BLOCK_BAD_APPTAG, APP, APP ^ 0x10, BLOCK + 8, "app tag before ref tag (block 1)");

	/* Ref tag wrong in block 1, guard wrong in block 3: the first bad block is reported. */
	configure(qps, cqs, rmkey, sdata_mr, 0x55);
	memcpy(cwire, swire, WIRE);
	cwire[pi(1) + 7] ^= 2;
	cwire[pi(3)] ^= 1;
	e = rx(qpa, cqa, cqs, cwire_mr, rmkey, "ref tag wrong in block 1, guard in block 3");
	expect_err(e, MLX5DV_MKEY_SIG_BLOCK_BAD_REFTAG, REF + 1, (REF + 1) ^ 2, BLOCK + 8,
		   "ref tag of the first bad block (block 1)");

	CHECK(mlx5dv_destroy_mkey(rmkey) == 0, "destroy the receiving mkey");
	CHECK(mlx5dv_destroy_mkey(smkey) == 0, "destroy the sending mkey");
	CHECK(ibv_destroy_qp(qpa) == 0 && ibv_destroy_qp(qps) == 0, "ibv_destroy_qp");
	CHECK(ibv_destroy_cq(cqa) == 0 && ibv_destroy_cq(cqs) == 0, "ibv_destroy_cq");
	CHECK(ibv_dereg_mr(cdata_mr) == 0 && ibv_dereg_mr(swire_mr) == 0 && ibv_dereg_mr(sdata_mr) == 0 &&
		      ibv_dereg_mr(cwire_mr) == 0,
	      "ibv_dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	free(cdata);
	free(swire);
	free(sdata);
	free(cwire);
	printf("PASS mkey_sig\n");
	return 0;
}
