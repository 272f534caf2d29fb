/* mlx5dv_query_device, mlx5dv_init_obj(PD) and the DEVX calls of a kernel context
 * (docs/behaviour.md items 6, 65, 70, 71): raw commands with their status and syndrome, a
 * DEVX PD object, query_eqn, a UAR, a umem, and the VFIO-only calls refused on a kernel
 * context. Build: cc -Wall -Werror devx.c -libverbs -lmlx5; run with
 * LD_LIBRARY_PATH=target/shim. */
#include <unistd.h>

#include "dv_common.h"

#define QUERY_HCA_CAP 0x100
#define ALLOC_PD 0x800
#define HCA_CAP_OUT (16 + 4096)

/* A 16-byte command header: opcode (bytes 0–1) and op_mod (bytes 6–7), big-endian. */
static void header(uint8_t *in, uint16_t opcode, uint16_t op_mod)
{
	memset(in, 0, 16);
	in[0] = opcode >> 8;
	in[1] = opcode & 0xff;
	in[6] = op_mod >> 8;
	in[7] = op_mod & 0xff;
}

static void query_device(struct ibv_context *ctx)
{
	uint64_t asked = MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD |
			 MLX5DV_CONTEXT_MASK_CQE_COMPRESION;
	struct mlx5dv_context dv = { .comp_mask = asked };
	int rc = mlx5dv_query_device(ctx, &dv);

	CHECK(rc == 0, "mlx5dv_query_device: %s", strerror(rc));
	CHECK_EQ(dv.version, 0, "mlx5dv_context.version");
	CHECK(dv.flags & MLX5DV_CONTEXT_FLAGS_CQE_V1, "mlx5dv_context.flags has CQE_V1 (0x%llx)",
	      (unsigned long long)dv.flags);
	CHECK((dv.comp_mask & ~asked) == 0, "comp_mask out 0x%llx has parts not asked for (0x%llx)",
	      (unsigned long long)dv.comp_mask, (unsigned long long)asked);
	CHECK_EQ(dv.comp_mask & (MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD),
		 MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD,
		 "SIGNATURE_OFFLOAD and CRYPTO_OFFLOAD echoed");
	struct mlx5dv_context none = { .comp_mask = 0 };
	CHECK(mlx5dv_query_device(ctx, &none) == 0 && none.comp_mask == 0, "nothing asked: comp_mask 0");
	PASS("mlx5dv_query_device: version 0, CQE_V1, requested parts echoed");
	struct mlx5dv_port port;
	CHECK_EQ(mlx5dv_query_port(ctx, 1, &port), 0, "mlx5dv_query_port(1)");
	CHECK(mlx5dv_query_port(ctx, 200, &port) != 0, "mlx5dv_query_port of a port the device lacks fails");
	PASS("mlx5dv_query_port");
}

static void commands(struct ibv_context *ctx, struct ibv_pd *pd)
{
	uint8_t in[16], small_out[16];
	static uint8_t out[HCA_CAP_OUT];

	/* The PD number raw commands name a verbs PD by. */
	struct mlx5dv_pd dvpd = { .comp_mask = 7 };
	struct mlx5dv_obj obj = { .pd = { .in = pd, .out = &dvpd } };
	int rc = mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD);
	CHECK(rc == 0, "mlx5dv_init_obj(PD): %s", strerror(rc));
	CHECK_EQ(dvpd.comp_mask, 0, "mlx5dv_pd.comp_mask");
	CHECK((dvpd.pdn & 0xff000000) == 0, "pdn 0x%x is a 24-bit number", dvpd.pdn);
	CHECK_EQ(mlx5dv_init_obj(&obj, 1ull << 40), EINVAL, "mlx5dv_init_obj with no known object type");
	PASS("mlx5dv_init_obj(PD)");

	header(in, QUERY_HCA_CAP, 0 << 1 | 1);
	rc = mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, sizeof(out));
	CHECK(rc == 0, "QUERY_HCA_CAP (general, current): %s", strerror(rc));
	CHECK_EQ(out[0], 0, "QUERY_HCA_CAP out.status");
	/* op_mod 0x7e: a capability type no device has. */
	header(in, QUERY_HCA_CAP, 0x7e << 1 | 1);
	memset(out, 0, 16);
	rc = mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, sizeof(out));
	CHECK_EQ(rc, EREMOTEIO, "QUERY_HCA_CAP of an unknown capability type");
	CHECK(out[0] != 0, "the failed command's out.status is valid (not OK)");
	/* A create command is not a general command. */
	header(in, ALLOC_PD, 0);
	CHECK_EQ(mlx5dv_devx_general_cmd(ctx, in, sizeof(in), small_out, sizeof(small_out)), EINVAL,
		 "general_cmd with a create command");
	PASS("mlx5dv_devx_general_cmd: OK, EREMOTEIO with status, EINVAL for a create command");

	/* A DEVX PD: ALLOC_PD as an object, freed by the implied DEALLOC_PD. */
	struct mlx5dv_devx_obj *o = mlx5dv_devx_obj_create(ctx, in, sizeof(in), small_out, sizeof(small_out));
	CHECK(o, "mlx5dv_devx_obj_create(ALLOC_PD): %s", strerror(errno));
	CHECK_EQ(small_out[0], 0, "ALLOC_PD out.status");
	uint32_t devx_pd = (uint32_t)small_out[9] << 16 | (uint32_t)small_out[10] << 8 | small_out[11];
	CHECK(devx_pd != dvpd.pdn, "the DEVX PD 0x%x differs from the verbs PD", devx_pd);
	header(in, QUERY_HCA_CAP, 1);
	CHECK(!mlx5dv_devx_obj_create(ctx, in, sizeof(in), small_out, sizeof(small_out)) && errno == EINVAL,
	      "obj_create with a query command: EINVAL");
	CHECK_EQ(mlx5dv_devx_obj_destroy(o), 0, "mlx5dv_devx_obj_destroy(PD)");
	PASS("DEVX object: ALLOC_PD created and destroyed");
}

static void resources(struct ibv_context *ctx, struct ibv_pd *pd)
{
	uint32_t eqn = 0xffffffff;
	int rc = mlx5dv_devx_query_eqn(ctx, 0, &eqn);

	CHECK(rc == 0, "mlx5dv_devx_query_eqn(0): %s", strerror(rc));
	CHECK_EQ(mlx5dv_devx_query_eqn(ctx, 1 << 20, &eqn), EINVAL, "query_eqn of a vector past the device's");
	PASS("mlx5dv_devx_query_eqn");

	struct mlx5dv_devx_uar *uar = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_BF);
	CHECK(uar, "mlx5dv_devx_alloc_uar(BF): %s", strerror(errno));
	CHECK(uar->base_addr && uar->reg_addr, "the UAR's addresses are set");
	CHECK_EQ((uintptr_t)uar->reg_addr - (uintptr_t)uar->base_addr, 0x800, "reg_addr - base_addr");
	CHECK_EQ(uar->comp_mask, 0, "UAR comp_mask");
	mlx5dv_devx_free_uar(uar);
	PASS("mlx5dv_devx_alloc_uar / free_uar");

	void *mem = NULL;
	CHECK(posix_memalign(&mem, 4096, 8192) == 0, "posix_memalign");
	memset(mem, 0, 8192);
	struct mlx5dv_devx_umem *umem = mlx5dv_devx_umem_reg(ctx, mem, 8192, IBV_ACCESS_LOCAL_WRITE);
	CHECK(umem, "mlx5dv_devx_umem_reg: %s", strerror(errno));
	CHECK(umem->umem_id != 0, "umem_id is set");
	CHECK_EQ(mlx5dv_devx_umem_dereg(umem), 0, "mlx5dv_devx_umem_dereg");
	/* A umem inside memory an MR already covers. */
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, 8192, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	umem = mlx5dv_devx_umem_reg(ctx, (char *)mem + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(umem, "mlx5dv_devx_umem_reg inside an MR: %s", strerror(errno));
	CHECK_EQ(mlx5dv_devx_umem_dereg(umem), 0, "mlx5dv_devx_umem_dereg");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	free(mem);
	PASS("mlx5dv_devx_umem_reg / dereg (own pages, and inside an MR)");

	/* Only the VFIO provider has MSI vectors and EQs (item 65). */
	CHECK(!mlx5dv_devx_alloc_msi_vector(ctx) && errno == EOPNOTSUPP,
	      "alloc_msi_vector on a kernel context: EOPNOTSUPP");
	uint8_t in[272] = { 0 }, out[64];
	CHECK(!mlx5dv_devx_create_eq(ctx, in, sizeof(in), out, sizeof(out)) && errno == EOPNOTSUPP,
	      "create_eq on a kernel context: EOPNOTSUPP");
	PASS("MSI vectors and EQs refused on a kernel context");
}

int main(void)
{
	struct ibv_context *ctx = dv_open_devx("mlx5_0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	CHECK(pd, "ibv_alloc_pd: %s", strerror(errno));
	query_device(ctx);
	commands(ctx, pd);
	resources(ctx, pd);

	struct mlx5dv_vfio_context_attr va = { .pci_name = "0000:08:00.0" };
	struct ibv_device **vl = mlx5dv_get_vfio_device_list(&va);
	if (vl) {
		CHECK(vl[0] && !vl[1], "the VFIO list holds one device");
		printf("ok: VFIO device %s listed\n", ibv_get_device_name(vl[0]));
		ibv_free_device_list(vl);
	} else {
		printf("note: no VFIO function 0000:08:00.0 (%s)\n", strerror(errno));
	}
	va.comp_mask = 1;
	CHECK(!mlx5dv_get_vfio_device_list(&va) && errno == EOPNOTSUPP, "VFIO list with a comp_mask: EOPNOTSUPP");

	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	printf("PASS devx\n");
	return 0;
}
