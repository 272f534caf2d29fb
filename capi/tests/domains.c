/* Thread domains and parent domains as libmlx5 keeps them: the checks of ibv_alloc_td and
 * ibv_alloc_parent_domain, the reference counts that make ibv_dealloc_td and ibv_dealloc_pd
 * EBUSY, a parent domain taken as a PD by ibv_reg_mr and ibv_create_qp_ex (and
 * ibv_create_cq_ex's IBV_CQ_INIT_ATTR_MASK_PD), allocators asked for each buffer in libmlx5's
 * order (the queue, then its doorbell record), queues in the memory an allocator gives, and RC
 * traffic on a parent domain. */
#include "common.h"

enum { LEN = 4096 };

/* What the allocators were asked, in order. */
static uint64_t asked[16];
static int nasked, nfreed, ngiven;
static void *given[8];

static void *use_default(struct ibv_pd *pd, void *pd_context, size_t size, size_t align, uint64_t type)
{
	(void)pd;
	CHECK(pd_context == &asked, "the allocator's pd_context");
	CHECK(size > 0 && align > 0, "size %zu, alignment %zu", size, align);
	if (nasked < 16)
		asked[nasked++] = type;
	return IBV_ALLOCATOR_USE_DEFAULT;
}

/* What give_memory was asked, in order; fail_dbr: it refuses doorbell records. */
static size_t asked_size[8], asked_align[8];
static int fail_dbr;

static void *give_memory(struct ibv_pd *pd, void *pd_context, size_t size, size_t align, uint64_t type)
{
	(void)pd, (void)pd_context;
	void *p;
	if (fail_dbr && type == MLX5DV_RES_TYPE_DBR)
		return NULL;
	if (ngiven == 8 || posix_memalign(&p, align, size))
		return NULL;
	asked_size[ngiven] = size;
	asked_align[ngiven] = align;
	given[ngiven++] = p;
	return p;
}

static void free_memory(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t type)
{
	(void)pd, (void)pd_context, (void)type;
	int known = 0;
	for (int i = 0; i < ngiven; i++)
		known |= given[i] == ptr;
	CHECK(known, "free of what the allocator gave");
	free(ptr);
	nfreed++;
}

static struct ibv_qp *qp_on(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};
	return ibv_create_qp_ex(ctx, &a);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");

	/* Thread domains: comp_mask must be 0. */
	struct ibv_td_init_attr tda = { .comp_mask = 1 };
	errno = 0;
	CHECK(!ibv_alloc_td(ctx, &tda), "ibv_alloc_td with comp_mask 1");
	CHECK_EQ(errno, EINVAL, "ibv_alloc_td with comp_mask 1");
	tda.comp_mask = 0;
	struct ibv_td *td = ibv_alloc_td(ctx, &tda);
	CHECK(td, "ibv_alloc_td: errno %d", errno);
	CHECK(td->context == ctx, "td->context");

	/* Parent domains: a PD is needed, and only the known comp_mask bits. */
	struct ibv_parent_domain_init_attr pa = { .pd = NULL, .td = td };
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &pa), "a parent domain without a PD");
	CHECK_EQ(errno, EINVAL, "a parent domain without a PD");
	pa.pd = pd;
	pa.comp_mask = 1 << 7;
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &pa), "a parent domain with comp_mask bit 7");
	CHECK_EQ(errno, EINVAL, "a parent domain with comp_mask bit 7");
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	pa.alloc = use_default;
	pa.free = free_memory;
	pa.pd_context = &asked;
	struct ibv_pd *parent = ibv_alloc_parent_domain(ctx, &pa);
	CHECK(parent, "ibv_alloc_parent_domain: errno %d", errno);
	CHECK(parent->context == ctx && parent->handle == pd->handle, "the parent domain carries the PD's handle");
	CHECK_EQ(ibv_dealloc_td(td), EBUSY, "ibv_dealloc_td under a parent domain");
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY, "ibv_dealloc_pd under a parent domain");

	/* A CQ on the parent domain: its ring, then its doorbell record. */
	struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD, .parent_domain = pd };
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &ca), "ibv_create_cq_ex on a PD that is not a parent domain");
	CHECK_EQ(errno, EINVAL, "ibv_create_cq_ex on a PD that is not a parent domain");
	ca.parent_domain = parent;
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
	CHECK(cqx, "ibv_create_cq_ex on a parent domain: errno %d", errno);
	CHECK_EQ(nasked, 2, "buffers asked for the CQ");
	CHECK(asked[0] == MLX5DV_RES_TYPE_CQ && asked[1] == MLX5DV_RES_TYPE_DBR, "the CQ's buffers: ring, then DBR");
	struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);

	/* QPs on the parent domain: their queues, then their doorbell records. */
	nasked = 0;
	struct ibv_qp *a = qp_on(ctx, parent, cq), *b = qp_on(ctx, parent, cq);
	CHECK(a && b, "QPs on a parent domain: errno %d", errno);
	CHECK(a->pd == parent, "qp->pd is the parent domain");
	CHECK_EQ(nasked, 4, "buffers asked for two QPs");
	CHECK(asked[0] == MLX5DV_RES_TYPE_QP && asked[1] == MLX5DV_RES_TYPE_DBR, "a QP's buffers: queues, then DBR");
	CHECK_EQ(ibv_dealloc_pd(parent), EBUSY, "ibv_dealloc_pd of a parent domain with QPs");

	/* An MR through the parent domain, and a WRITE between the two QPs. */
	char *src = calloc(1, LEN), *dst = calloc(1, LEN);
	for (int i = 0; i < LEN; i++)
		src[i] = (char)(i * 7 + 1);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr *smr = ibv_reg_mr(parent, src, LEN, access), *dmr = ibv_reg_mr(parent, dst, LEN, access);
	CHECK(smr && dmr, "ibv_reg_mr on a parent domain: errno %d", errno);
	CHECK(smr->pd == parent, "mr->pd is the parent domain");
	connect_qp(ctx, a, b);
	connect_qp(ctx, b, a);
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = LEN, .lkey = smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr = { .rdma = { .remote_addr = (uintptr_t)dst, .rkey = dmr->rkey } } };
	struct ibv_send_wr *bad;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "ibv_post_send");
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, "the WRITE's completion");
	CHECK(memcmp(src, dst, LEN) == 0, "the WRITE's bytes");

	/* An allocator that gives its own memory: the queues live in it (mlx5dv_init_obj points
	 * there), traffic runs through them, and destroying them gives the memory back. */
	struct ibv_parent_domain_init_attr pb = { .pd = pd, .comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS,
						  .alloc = give_memory, .free = free_memory };
	struct ibv_pd *giving = ibv_alloc_parent_domain(ctx, &pb);
	CHECK(giving, "a second parent domain: errno %d", errno);
	struct ibv_qp *c = qp_on(ctx, giving, cq), *d = qp_on(ctx, giving, cq);
	CHECK(c && d, "QPs in the allocator's memory: errno %d", errno);
	CHECK_EQ(ngiven, 4, "a buffer and a doorbell record for each QP");
	CHECK(asked_align[1] == 8 && asked_size[1] == 8, "a doorbell record: 8 bytes aligned to 8");
	CHECK(asked_align[0] >= 64 && (asked_align[0] & (asked_align[0] - 1)) == 0, "the QP buffer's alignment %zu",
	      asked_align[0]);
	struct mlx5dv_qp dq;
	struct mlx5dv_obj obj = { .qp = { .in = c, .out = &dq } };
	CHECK_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP), 0, "mlx5dv_init_obj");
	CHECK(dq.rq.buf == given[0] && (void *)dq.dbrec == given[1],
	      "the QP's receive queue and doorbell record are the allocator's memory");
	connect_qp(ctx, c, d);
	connect_qp(ctx, d, c);
	memset(dst, 0, LEN);
	wr.wr_id = 8;
	CHECK_EQ(ibv_post_send(c, &wr, &bad), 0, "ibv_post_send on a QP in the allocator's memory");
	wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 8, "the WRITE's completion: status %d", wc.status);
	CHECK(memcmp(src, dst, LEN) == 0, "the WRITE's bytes");
	CHECK_EQ(ibv_destroy_qp(c), 0, "destroy a QP in the allocator's memory");
	CHECK_EQ(ibv_destroy_qp(d), 0, "destroy a QP in the allocator's memory");
	CHECK_EQ(nfreed, 4, "the allocator's memory given back when the QPs go");
	/* An allocator that fails the doorbell record: ENOMEM, the buffer it gave given back. */
	fail_dbr = 1;
	errno = 0;
	CHECK(!qp_on(ctx, giving, cq), "a QP whose doorbell record the allocator refuses");
	CHECK_EQ(errno, ENOMEM, "a QP whose doorbell record the allocator refuses");
	CHECK_EQ(nfreed, 5, "its buffer given back");
	CHECK_EQ(ibv_dealloc_pd(giving), 0, "ibv_dealloc_pd of the second parent domain");

	/* Teardown in order: the parent domain goes before its PD and TD. */
	CHECK_EQ(ibv_destroy_qp(a), 0, "destroy QP a");
	CHECK_EQ(ibv_destroy_qp(b), 0, "destroy QP b");
	CHECK_EQ(ibv_dereg_mr(smr), 0, "dereg");
	CHECK_EQ(ibv_dereg_mr(dmr), 0, "dereg");
	CHECK_EQ(ibv_dealloc_pd(parent), EBUSY, "ibv_dealloc_pd of a parent domain with a CQ");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "destroy CQ");
	CHECK_EQ(ibv_dealloc_pd(parent), 0, "ibv_dealloc_pd of the parent domain");
	CHECK_EQ(ibv_dealloc_td(td), 0, "ibv_dealloc_td");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "close");
	ibv_free_device_list(list);
	free(src);
	free(dst);
	printf("domains: ok\n");
	return 0;
}
