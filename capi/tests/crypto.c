/* A crypto mkey without crypto attributes (docs/behaviour.md item 59), and the crypto login
 * calls around it (items 51, 52):
 *  - DEK checks; on a device in plaintext-key mode a DEK, mlx5dv_wr_set_mkey_crypto and an
 *    AES-XTS round trip between two crypto mkeys;
 *  - a fresh context has no login: query_state NO_LOGIN, logout ENOENT;
 *  - the simulator's published test credential logs in (on a real card a device credential
 *    of its own is needed: a refusal is reported, not failed), state VALID, logout;
 *  - an mkey created with MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO and configured with access flags
 *    and a layout but no mlx5dv_wr_set_mkey_crypto: an RDMA WRITE from it (local key)
 *    completes with IBV_WC_LOC_PROT_ERR and vendor_err 0x56 (the simulator's [crypto.error]
 *    default; unverified on hardware, which publishes no syndrome), an RDMA WRITE into it
 *    (remote key) with IBV_WC_REM_ACCESS_ERR; nothing reaches the peer either way.
 * Build: cc -Wall -Werror crypto.c -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include "dv_common.h"

#define LEN 64

static const int ALL_ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

/* The credential of the simulator's credential id 1, key-wrapped under its import KEK id 1
 * (README, "Crypto secrets"), padded to the 48-byte field. */
static const uint8_t CREDENTIAL[48] = {
	0x05, 0x92, 0x4d, 0xe3, 0x1c, 0xca, 0x4e, 0xae, 0xa6, 0xb7, 0xd8, 0x38, 0x2f, 0xb7, 0x81, 0x0f,
	0xed, 0xaf, 0x23, 0x89, 0x0c, 0xe0, 0xab, 0x48, 0xf3, 0x20, 0xf0, 0x38, 0x99, 0xe7, 0xe4, 0x21,
	0x29, 0x25, 0x1e, 0x6d, 0x1c, 0x71, 0xf7, 0x4a, 0x1e, 0x46, 0x3a, 0x8b, 0xde, 0xc0, 0x38, 0x82,
};

/* The AES-256-XTS key 0x40 0x41 … 0x7f (key1 | key2), key-wrapped (RFC 3394) under the
 * simulator's import KEK id 1. */
static const uint8_t WRAPPED_KEY[72] = {
	0xed, 0x02, 0xb9, 0xda, 0x1d, 0x49, 0x4f, 0xb4, 0x08, 0xf4, 0xbc, 0xab, 0x1e, 0x9c, 0xf4, 0xb0,
	0x50, 0xfa, 0x66, 0xf8, 0x66, 0x82, 0x5e, 0x76, 0x76, 0xcf, 0xa0, 0x4e, 0xbc, 0xdd, 0xe3, 0x95,
	0x8d, 0x15, 0x68, 0xd4, 0xb3, 0x60, 0xc1, 0xbd, 0x35, 0xe0, 0xdf, 0x76, 0x9e, 0xed, 0xb3, 0xa4,
	0x4c, 0xcb, 0x09, 0x8d, 0x71, 0x46, 0x30, 0x3e, 0x33, 0x98, 0x5c, 0x36, 0x67, 0x90, 0xee, 0xaf,
	0x12, 0x3c, 0x35, 0x14, 0xbc, 0x46, 0x94, 0x06,
};

/* The login checks; true when the context is left logged in (wrapped mode, test credential
 * accepted). */
static int login_calls(struct ibv_context *ctx, const struct mlx5dv_context *dv)
{
	enum mlx5dv_crypto_login_state state = MLX5DV_CRYPTO_LOGIN_STATE_VALID;
	int rc = mlx5dv_crypto_login_query_state(ctx, &state);

	CHECK(rc == 0, "mlx5dv_crypto_login_query_state: %s", strerror(rc));
	CHECK_EQ(state, MLX5DV_CRYPTO_LOGIN_STATE_NO_LOGIN, "login state of a fresh context");
	CHECK_EQ(mlx5dv_crypto_logout(ctx), ENOENT, "mlx5dv_crypto_logout without a login");
	PASS("no login on a fresh context (NO_LOGIN, logout ENOENT)");

	if (!(dv->crypto_caps.flags & MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_OPERATIONAL)) {
		printf("note: the device is not in wrapped crypto mode; login not tried\n");
		return 0;
	}
	struct mlx5dv_crypto_login_attr a = { .credential_id = 1, .import_kek_id = 1 };
	memcpy(a.credential, CREDENTIAL, sizeof(a.credential));
	struct mlx5dv_crypto_login_attr bad = a;
	bad.comp_mask = 1;
	CHECK_EQ(mlx5dv_crypto_login(ctx, &bad), EINVAL, "mlx5dv_crypto_login with a non-zero comp_mask");
	rc = mlx5dv_crypto_login(ctx, &a);
	if (rc == EINVAL) {
		printf("note: the device refuses the simulator's test credential (EINVAL); login part skipped\n");
		return 0;
	}
	CHECK(rc == 0, "mlx5dv_crypto_login: %s", strerror(rc));
	CHECK_EQ(mlx5dv_crypto_login(ctx, &a), EEXIST, "a second mlx5dv_crypto_login");
	rc = mlx5dv_crypto_login_query_state(ctx, &state);
	CHECK(rc == 0 && state == MLX5DV_CRYPTO_LOGIN_STATE_VALID, "login state after login: rc %d state %d", rc,
	      (int)state);
	PASS("login VALID, EEXIST twice");
	return 1;
}

/* Log out of the session login_calls left open. */
static void logout(struct ibv_context *ctx)
{
	enum mlx5dv_crypto_login_state state = MLX5DV_CRYPTO_LOGIN_STATE_VALID;

	CHECK_EQ(mlx5dv_crypto_logout(ctx), 0, "mlx5dv_crypto_logout");
	int rc = mlx5dv_crypto_login_query_state(ctx, &state);
	CHECK(rc == 0 && state == MLX5DV_CRYPTO_LOGIN_STATE_NO_LOGIN, "login state after logout");
	PASS("logout: NO_LOGIN again");
}

/* A fresh crypto mkey. */
static struct mlx5dv_mkey *new_crypto_mkey(struct ibv_pd *pd)
{
	struct mlx5dv_mkey_init_attr a = {
		.pd = pd,
		.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT | MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO,
		.max_entries = 4,
	};
	struct mlx5dv_mkey *mkey = mlx5dv_create_mkey(&a);
	CHECK(mkey, "mlx5dv_create_mkey(CRYPTO): %s", strerror(errno));
	return mkey;
}

/* Configure `mkey` on `qp` over `mr` with access flags, a layout and, if `crypto`, the crypto
 * attributes; the result of ibv_wr_complete. */
static int configure(struct ibv_qp *qp, struct mlx5dv_mkey *mkey, struct ibv_mr *mr,
		     const struct mlx5dv_crypto_attr *crypto)
{
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	struct mlx5dv_qp_ex *dqp = mlx5dv_qp_ex_from_ibv_qp_ex(qpx);
	struct mlx5dv_mkey_conf_attr conf = { 0 };
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = (uint32_t)mr->length, .lkey = mr->lkey };

	CHECK(qpx && dqp, "ibv_qp_to_qp_ex / mlx5dv_qp_ex_from_ibv_qp_ex");
	ibv_wr_start(qpx);
	qpx->wr_id = 0xc0f;
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	mlx5dv_wr_mkey_configure(dqp, mkey, crypto ? 3 : 2, &conf);
	mlx5dv_wr_set_mkey_access_flags(dqp, ALL_ACCESS);
	mlx5dv_wr_set_mkey_layout_list(dqp, 1, &sge);
	if (crypto)
		mlx5dv_wr_set_mkey_crypto(dqp, crypto);
	return ibv_wr_complete(qpx);
}

/* A crypto mkey over `mr`, configured on `qp` with access flags and a layout only. */
static struct mlx5dv_mkey *crypto_mkey(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr)
{
	struct mlx5dv_mkey *mkey = new_crypto_mkey(pd);
	int rc = configure(qp, mkey, mr, NULL);

	CHECK(rc == 0, "configure the crypto mkey without crypto attributes: %s", strerror(rc));
	dv_ok_cqe(cq, 0xc0f, MLX5DV_WC_UMR, "configure completion (MLX5DV_WC_UMR)");
	return mkey;
}

/* The DEK calls (item 53, 54) and an AES-XTS round trip: the client's plaintext leaves
 * encrypted through its crypto mkey, and the ciphertext written into the server's crypto mkey
 * arrives decrypted. The DEK is a plaintext key on a device in plaintext mode, and the key
 * wrapped under the test KEK on one in wrapped mode with the session `logged_in` open. */
static void dek_calls(struct ibv_context *ctx, const struct mlx5dv_context *dv, int logged_in, struct ibv_pd *pd,
		      struct ibv_qp *qpa, struct ibv_cq *cqa, struct ibv_qp *qps, struct ibv_cq *cqs)
{
	struct mlx5dv_dek_init_attr a = {
		.key_size = MLX5DV_CRYPTO_KEY_SIZE_256, .has_keytag = false,
		.key_purpose = MLX5DV_CRYPTO_KEY_PURPOSE_AES_XTS, .pd = pd,
		.comp_mask = MLX5DV_DEK_INIT_ATTR_CRYPTO_LOGIN, .crypto_login = NULL,
	};
	memcpy(a.opaque, "opaque!", 8);
	for (int i = 0; i < 64; i++)
		a.key[i] = (char)(0x40 + i);
	struct mlx5dv_dek_init_attr bad = a;
	bad.key_purpose = 7;
	CHECK(!mlx5dv_dek_create(ctx, &bad) && errno == EINVAL, "mlx5dv_dek_create with an unknown key purpose: EINVAL");
	int wrapped = dv->crypto_caps.wrapped_import_method & MLX5DV_CRYPTO_WRAPPED_IMPORT_METHOD_CAP_AES_XTS;
	struct mlx5dv_dek *dek = mlx5dv_dek_create(ctx, &a);
	if (wrapped) {
		CHECK(!dek && errno == EINVAL, "a plaintext DEK on a device in wrapped mode: EINVAL");
		PASS("DEK checks (unknown purpose, plaintext key in wrapped mode)");
		if (!logged_in) {
			printf("note: no login session; the wrapped-key DEK is not tried\n");
			return;
		}
		a.comp_mask = 0;
		memset(a.key, 0, sizeof(a.key));
		memcpy(a.key, WRAPPED_KEY, sizeof(WRAPPED_KEY));
		dek = mlx5dv_dek_create(ctx, &a);
		CHECK(dek, "mlx5dv_dek_create (wrapped key, session login): %s", strerror(errno));
	} else {
		CHECK(dek, "mlx5dv_dek_create (plaintext key): %s", strerror(errno));
	}
	struct mlx5dv_dek_attr q = { .comp_mask = 1 };
	CHECK_EQ(mlx5dv_dek_query(dek, &q), EINVAL, "mlx5dv_dek_query with a non-zero comp_mask");
	q.comp_mask = 0;
	int rc = mlx5dv_dek_query(dek, &q);
	CHECK(rc == 0 && q.state == MLX5DV_DEK_STATE_READY, "mlx5dv_dek_query: rc %d state %d", rc, (int)q.state);
	CHECK(memcmp(q.opaque, "opaque!", 8) == 0, "mlx5dv_dek_query: the opaque bytes");

	enum { N = 512 };
	uint8_t *pt, *ct, *cct, *out;
	struct ibv_mr *pt_mr = dv_region(pd, N, IBV_ACCESS_LOCAL_WRITE, &pt);
	struct ibv_mr *ct_mr = dv_region(pd, N, ALL_ACCESS, &ct);
	struct ibv_mr *cct_mr = dv_region(pd, N, IBV_ACCESS_LOCAL_WRITE, &cct);
	struct ibv_mr *out_mr = dv_region(pd, N, IBV_ACCESS_LOCAL_WRITE, &out);
	for (size_t i = 0; i < N; i++)
		pt[i] = dv_pattern(i, 5);
	struct mlx5dv_crypto_attr ca = {
		.crypto_standard = MLX5DV_CRYPTO_STANDARD_AES_XTS, .encrypt_on_tx = true,
		.signature_crypto_order = MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_AFTER_CRYPTO_ON_TX,
		.data_unit_size = MLX5DV_BLOCK_SIZE_512, .dek = dek,
	};
	ca.initial_tweak[0] = 7;

	/* A crypto setter with a non-zero comp_mask: EINVAL, nothing posted (item 55). */
	struct mlx5dv_mkey *m1 = new_crypto_mkey(pd);
	struct mlx5dv_crypto_attr badc = ca;
	badc.comp_mask = 1;
	CHECK_EQ(configure(qpa, m1, pt_mr, &badc), EINVAL, "mlx5dv_wr_set_mkey_crypto with a non-zero comp_mask");
	dv_no_cqe(cqa, "after the refused configure");

	rc = configure(qpa, m1, pt_mr, &ca);
	CHECK(rc == 0, "configure the client's crypto mkey: %s", strerror(rc));
	dv_ok_cqe(cqa, 0xc0f, MLX5DV_WC_UMR, "configure completion (client)");
	rc = dv_write(qpa, 3, m1->lkey, 0, N, ct_mr->rkey, (uintptr_t)ct);
	CHECK(rc == 0, "RDMA WRITE from the encrypting mkey: %s", strerror(rc));
	dv_ok_cqe(cqa, 3, IBV_WC_RDMA_WRITE, "RDMA WRITE from the encrypting mkey");
	CHECK(memcmp(ct, pt, N) != 0, "the wire bytes are not the plaintext");

	struct mlx5dv_mkey *m2 = new_crypto_mkey(pd);
	rc = configure(qps, m2, out_mr, &ca);
	CHECK(rc == 0, "configure the server's crypto mkey: %s", strerror(rc));
	dv_ok_cqe(cqs, 0xc0f, MLX5DV_WC_UMR, "configure completion (server)");
	memcpy(cct, ct, N);
	rc = dv_write(qpa, 4, cct_mr->lkey, (uintptr_t)cct, N, m2->rkey, 0);
	CHECK(rc == 0, "RDMA WRITE into the decrypting mkey: %s", strerror(rc));
	dv_ok_cqe(cqa, 4, IBV_WC_RDMA_WRITE, "RDMA WRITE into the decrypting mkey");
	CHECK(memcmp(out, pt, N) == 0, "the ciphertext arrives decrypted");
	PASS(wrapped ? "AES-XTS round trip through two crypto mkeys (wrapped DEK)"
		     : "AES-XTS round trip through two crypto mkeys (plaintext DEK)");

	CHECK(mlx5dv_destroy_mkey(m1) == 0 && mlx5dv_destroy_mkey(m2) == 0, "mlx5dv_destroy_mkey (crypto)");
	CHECK_EQ(mlx5dv_dek_destroy(dek), 0, "mlx5dv_dek_destroy");
	CHECK(ibv_dereg_mr(pt_mr) == 0 && ibv_dereg_mr(ct_mr) == 0 && ibv_dereg_mr(cct_mr) == 0 &&
		      ibv_dereg_mr(out_mr) == 0,
	      "ibv_dereg_mr");
	free(pt);
	free(ct);
	free(cct);
	free(out);
}

static void untouched(const uint8_t *buf, uint8_t seed, const char *what)
{
	for (size_t i = 0; i < LEN; i++)
		CHECK(buf[i] == dv_pattern(i, seed), "%s: byte %zu changed", what, i);
}

int main(void)
{
	struct ibv_context *ctx = dv_open_devx("mlx5_0");
	struct mlx5dv_context dv = dv_caps(ctx);

	if (!(dv.comp_mask & MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD) || !(dv.crypto_caps.flags & MLX5DV_CRYPTO_CAPS_CRYPTO) ||
	    !(dv.crypto_caps.crypto_engines &
	      (MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_SINGLE_BLOCK | MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_MULTI_BLOCK)))
		SKIP("the device has no AES-XTS crypto engine");

	int logged_in = login_calls(ctx, &dv);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd: %s", strerror(errno));
	uint8_t *cbuf, *sbuf;
	struct ibv_mr *cmr = dv_region(pd, LEN, IBV_ACCESS_LOCAL_WRITE, &cbuf);
	struct ibv_mr *smr = dv_region(pd, LEN, ALL_ACCESS, &sbuf);
	for (size_t i = 0; i < LEN; i++) {
		cbuf[i] = dv_pattern(i, 2);
		sbuf[i] = dv_pattern(i, 1);
	}

	/* A local key: the requester reads through the crypto mkey. */
	struct ibv_cq *cqa = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cqs = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cqa && cqs, "ibv_create_cq: %s", strerror(errno));
	struct ibv_qp *qpa = dv_qp(ctx, pd, cqa);
	struct ibv_qp *qps = dv_qp(ctx, pd, cqs);
	dv_connect(ctx, qpa, qps);
	dv_connect(ctx, qps, qpa);
	dek_calls(ctx, &dv, logged_in, pd, qpa, cqa, qps, cqs);
	if (logged_in)
		logout(ctx);
	struct mlx5dv_mkey *lmkey = crypto_mkey(pd, qpa, cqa, cmr);
	int rc = dv_write(qpa, 1, lmkey->lkey, 0, 16, smr->rkey, (uintptr_t)sbuf);
	CHECK(rc == 0, "post an RDMA WRITE from the crypto mkey: %s", strerror(rc));
	struct ibv_wc wc = dv_poll_one(cqa, "RDMA WRITE from the crypto mkey");
	CHECK_EQ(wc.wr_id, 1, "error completion wr_id");
	CHECK(wc.status != IBV_WC_SUCCESS, "RDMA WRITE from a crypto mkey without crypto attributes succeeded");
	CHECK(wc.status == IBV_WC_LOC_PROT_ERR && wc.vendor_err == 0x56,
	      "local crypto mkey without attributes: status %s (%d), vendor_err 0x%x; expected local protection "
	      "error (4), vendor_err 0x56",
	      ibv_wc_status_str(wc.status), (int)wc.status, wc.vendor_err);
	untouched(sbuf, 1, "the peer's buffer after the failed WRITE");
	PASS("local crypto mkey without attributes: LOC_PROT_ERR, vendor_err 0x56, nothing sent");

	/* A remote key: the responder refuses the WRITE into its crypto mkey. */
	struct ibv_cq *cqb = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cqt = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cqb && cqt, "ibv_create_cq: %s", strerror(errno));
	struct ibv_qp *qpb = dv_qp(ctx, pd, cqb);
	struct ibv_qp *qpt = dv_qp(ctx, pd, cqt);
	dv_connect(ctx, qpb, qpt);
	dv_connect(ctx, qpt, qpb);
	struct mlx5dv_mkey *rmkey = crypto_mkey(pd, qpt, cqt, smr);
	rc = dv_write(qpb, 2, cmr->lkey, (uintptr_t)cbuf, 16, rmkey->rkey, 0);
	CHECK(rc == 0, "post an RDMA WRITE into the crypto mkey: %s", strerror(rc));
	wc = dv_poll_one(cqb, "RDMA WRITE into the crypto mkey");
	CHECK_EQ(wc.wr_id, 2, "error completion wr_id");
	CHECK(wc.status == IBV_WC_REM_ACCESS_ERR, "remote crypto mkey without attributes: status %s (%d), expected %s",
	      ibv_wc_status_str(wc.status), (int)wc.status, ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
	untouched(sbuf, 1, "the responder's buffer after the refused WRITE");
	PASS("remote crypto mkey without attributes: REM_ACCESS_ERR, nothing written");

	CHECK(mlx5dv_destroy_mkey(lmkey) == 0 && mlx5dv_destroy_mkey(rmkey) == 0, "mlx5dv_destroy_mkey");
	CHECK(ibv_destroy_qp(qpa) == 0 && ibv_destroy_qp(qps) == 0 && ibv_destroy_qp(qpb) == 0 &&
		      ibv_destroy_qp(qpt) == 0,
	      "ibv_destroy_qp");
	CHECK(ibv_destroy_cq(cqa) == 0 && ibv_destroy_cq(cqs) == 0 && ibv_destroy_cq(cqb) == 0 &&
		      ibv_destroy_cq(cqt) == 0,
	      "ibv_destroy_cq");
	CHECK(ibv_dereg_mr(cmr) == 0 && ibv_dereg_mr(smr) == 0, "ibv_dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	free(cbuf);
	free(sbuf);
	printf("PASS crypto\n");
	return 0;
}
