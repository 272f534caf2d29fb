/* A raw DEVX RC QP connected to itself on a kernel context, its queues and CQ in the
 * program's umem, rung by a plain store to the UAR's register, its completion polled from
 * memory (docs/behaviour.md items 100, 101, 71): the way rdma-core's test_mlx5_devx.py drives
 * a device. Also: the NC UAR is the context's one struct, a failed command's whole output
 * mailbox comes back, and a VFIO context has num_comp_vectors MSI-X vectors (item 66).
 * Build: cc -Wall -Werror devx_ring.c -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include <unistd.h>

#include "dv_common.h"

/* PRM field positions (mlx5_ifc.h): bit offset and width of the whole mailbox. */
#define F(bit, width) (bit), (width)

/* Set a big-endian bit field, as DEVX_SET does. */
static void set(uint8_t *buf, unsigned bit, unsigned width, uint64_t v)
{
	for (unsigned i = 0; i < width; i++) {
		unsigned pos = bit + width - 1 - i;
		uint8_t m = 1u << (7 - pos % 8);
		if (v >> i & 1)
			buf[pos / 8] |= m;
		else
			buf[pos / 8] &= ~m;
	}
}

static uint32_t get24(const uint8_t *out, unsigned byte)
{
	return (uint32_t)out[byte] << 16 | (uint32_t)out[byte + 1] << 8 | out[byte + 2];
}

static void header(uint8_t *in, size_t len, uint16_t opcode, uint16_t op_mod)
{
	memset(in, 0, len);
	set(in, F(0, 16), opcode);
	set(in, F(0x30, 16), op_mod);
}

/* Layout of the one buffer: CQ ring, send queue, doorbell records, source and destination. */
enum { CQ = 0, SQ = 0x1000, DBR = 0x2000, SRC = 0x3000, DST = 0x3100, LEN = 0x4000 };

static void modify(struct mlx5dv_devx_obj *qp, uint8_t *in, const char *what)
{
	uint8_t out[16];
	int rc = mlx5dv_devx_obj_modify(qp, in, 272, out, sizeof(out));
	CHECK(rc == 0, "%s: %s (status 0x%x)", what, strerror(rc), out[0]);
}

static void ring_a_raw_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct mlx5dv_devx_uar *uar)
{
	struct mlx5dv_pd dvpd = { 0 };
	struct mlx5dv_obj obj = { .pd = { .in = pd, .out = &dvpd } };
	CHECK(mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD) == 0, "mlx5dv_init_obj(PD)");
	uint8_t *mem = NULL;
	CHECK(posix_memalign((void **)&mem, 4096, LEN) == 0, "posix_memalign");
	memset(mem, 0, LEN);
	memset(mem + CQ, 0xff, 0x1000); /* every CQE invalid, owned by hardware */
	for (int i = 0; i < 64; i++)
		mem[SRC + i] = (uint8_t)(i * 7 + 1);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct mlx5dv_devx_umem *umem = mlx5dv_devx_umem_reg(ctx, mem, LEN, acc);
	CHECK(umem, "mlx5dv_devx_umem_reg: %s", strerror(errno));
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, LEN, acc);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	uint32_t eqn;
	CHECK(mlx5dv_devx_query_eqn(ctx, 0, &eqn) == 0, "query_eqn(0)");

	uint8_t in[272], out[16];
	header(in, sizeof(in), 0x400, 0); /* CREATE_CQ of 64 CQEs in the umem */
	set(in, F(0xe3, 5), 6);
	set(in, F(0xe8, 24), uar->page_id);
	set(in, F(0x138, 8), eqn);
	set(in, F(0x2e0, 1), 1);
	set(in, F(0x2c0, 32), umem->umem_id);
	set(in, F(0x280, 64), CQ);
	set(in, F(0x86, 1), 1);
	set(in, F(0xa0, 32), umem->umem_id);
	set(in, F(0x240, 64), DBR);
	struct mlx5dv_devx_obj *cq = mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out));
	CHECK(cq, "CREATE_CQ: %s (status 0x%x)", strerror(errno), out[0]);
	uint32_t cqn = get24(out, 9);

	header(in, sizeof(in), 0x500, 0); /* CREATE_QP: RC, 64 send blocks, no receive queue */
	set(in, F(0xe8, 24), dvpd.pdn);
	set(in, F(0x111, 4), 6);
	set(in, F(0x625, 3), 3);
	set(in, F(0x128, 24), uar->page_id);
	set(in, F(0x4a8, 24), cqn);
	set(in, F(0x5a8, 24), cqn);
	set(in, F(0x860, 1), 1);
	set(in, F(0x840, 32), umem->umem_id);
	set(in, F(0x800, 64), SQ);
	set(in, F(0x743, 1), 1);
	set(in, F(0x7e0, 32), umem->umem_id);
	set(in, F(0x5c0, 64), DBR + 0x40);
	struct mlx5dv_devx_obj *qp = mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out));
	CHECK(qp, "CREATE_QP: %s (status 0x%x)", strerror(errno), out[0]);
	uint32_t qpn = get24(out, 9);

	struct ibv_port_attr port;
	CHECK(ibv_query_port(ctx, 1, &port) == 0, "ibv_query_port");
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "ibv_query_gid");
	header(in, sizeof(in), 0x502, 0); /* RST2INIT */
	set(in, F(0x48, 24), qpn);
	set(in, F(0x550, 2), 3);
	set(in, F(0x2a8, 8), 1);
	modify(qp, in, "RST2INIT_QP");
	header(in, sizeof(in), 0x503, 0); /* INIT2RTR towards itself */
	set(in, F(0x48, 24), qpn);
	set(in, F(0x168, 24), qpn);
	set(in, F(0x100, 3), 3);
	set(in, F(0x2a8, 8), 1);
	if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		set(in, F(0x1a8, 1), 1);
		set(in, F(0x1d8, 8), 64);
		memcpy(in + 0x40, gid.raw, 16);
	} else {
		set(in, F(0x1b0, 16), port.lid);
	}
	modify(qp, in, "INIT2RTR_QP");
	header(in, sizeof(in), 0x504, 0); /* RTR2RTS */
	set(in, F(0x48, 24), qpn);
	modify(qp, in, "RTR2RTS_QP");
	PASS("a raw RC QP in the program's umem, connected to itself");

	/* A signaled 64-byte RDMA WRITE: control, remote address and data segments. */
	uint8_t *wqe = mem + SQ;
	set(wqe, F(0x18, 8), 0x08);
	set(wqe, F(0x20, 24), qpn);
	set(wqe, F(0x38, 8), 3);
	set(wqe, F(0x58, 8), 0x08);
	set(wqe, F(0x80, 64), (uintptr_t)(mem + DST));
	set(wqe, F(0xc0, 32), mr->rkey);
	set(wqe, F(0x100, 32), 64);
	set(wqe, F(0x120, 32), mr->lkey);
	set(wqe, F(0x140, 64), (uintptr_t)(mem + SRC));
	set(mem + DBR + 0x44, F(0, 32), 1);
	__sync_synchronize();
	uint64_t first;
	memcpy(&first, wqe, 8);
	*(volatile uint64_t *)uar->reg_addr = first;

	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	while ((*(volatile uint8_t *)(mem + CQ + 63) >> 4) == 0xf) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		CHECK(now.tv_sec - start.tv_sec < 5, "no CQE 5 s after the doorbell store");
		usleep(10);
	}
	__sync_synchronize();
	CHECK_EQ(mem[CQ + 63] >> 4, 0, "a requester CQE (opcode 0)");
	CHECK(memcmp(mem + SRC, mem + DST, 64) == 0, "the 64 bytes arrived");
	PASS("a store to reg_addr rings the doorbell; the CQE appears in the umem");

	CHECK_EQ(mlx5dv_devx_obj_destroy(qp), 0, "destroy the QP");
	CHECK_EQ(mlx5dv_devx_obj_destroy(cq), 0, "destroy the CQ");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	CHECK_EQ(mlx5dv_devx_umem_dereg(umem), 0, "umem_dereg");
	free(mem);
}

static void failed_mailbox(struct ibv_context *ctx)
{
	uint8_t in[16], out[64];
	header(in, sizeof(in), 0x100, 0x7e << 1 | 1); /* a capability type no device has */
	memset(out, 0xaa, sizeof(out));
	CHECK_EQ(mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, sizeof(out)), EREMOTEIO, "QUERY_HCA_CAP 0x7e");
	CHECK(out[0] != 0, "out.status is set");
	for (size_t i = 8; i < sizeof(out); i++)
		CHECK_EQ(out[i], 0, "the rest of the failed command's output mailbox");
	PASS("a failed command's whole output mailbox comes back");
}

static void vfio_vectors(void)
{
	struct mlx5dv_vfio_context_attr va = { .pci_name = "0000:08:00.0" };
	struct ibv_device **vl = mlx5dv_get_vfio_device_list(&va);
	if (!vl || !vl[0]) {
		printf("ok: no VFIO function 0000:08:00.0 (its vectors not checked)\n");
		return;
	}
	struct ibv_context *v = ibv_open_device(vl[0]);
	CHECK(v, "ibv_open_device(VFIO): %s", strerror(errno));
	int n = 0;
	struct mlx5dv_devx_msi_vector *m[1024];
	while (n < 1024 && (m[n] = mlx5dv_devx_alloc_msi_vector(v)))
		n++;
	CHECK_EQ(errno, ENOSPC, "alloc_msi_vector past the last vector");
	CHECK_EQ(n + 1, v->num_comp_vectors, "num_comp_vectors: the vectors, the command EQ's among them");
	for (int i = 0; i < n; i++)
		CHECK_EQ(mlx5dv_devx_free_msi_vector(m[i]), 0, "free_msi_vector");
	CHECK_EQ(ibv_close_device(v), 0, "close the VFIO context");
	PASS("a VFIO context's num_comp_vectors is its MSI-X vector count");
}

int main(void)
{
	struct ibv_context *ctx = dv_open_devx("mlx5_0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd: %s", strerror(errno));

	struct mlx5dv_devx_uar *uar = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
	CHECK(uar, "mlx5dv_devx_alloc_uar(NC): %s", strerror(errno));
	CHECK(mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC) == uar, "NC again: the same struct");
	mlx5dv_devx_free_uar(uar);
	CHECK(mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC) == uar, "NC after a free: still the same");
	PASS("the NC UAR is the context's one struct; freeing it does nothing");

	failed_mailbox(ctx);
	ring_a_raw_qp(ctx, pd, uar);
	mlx5dv_devx_free_uar(uar);
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	vfio_vectors();
	return 0;
}
