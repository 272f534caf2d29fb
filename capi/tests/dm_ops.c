/* MEMIC atomic operation addresses (mlx5dv_dm_map_op_addr): a store to the increment page
 * adds to the DM's byte, a load from the test-and-set page returns it and sets it to 0xff;
 * an operation the device lacks is EOPNOTSUPP; a program's own SIGSEGV handler still sees
 * the faults that are not the device's.
 * Build: cc -Wall -Werror dm_ops.c -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include "dv_common.h"

static sigjmp_buf back;
static volatile sig_atomic_t own_faults;

static void own_handler(int sig)
{
	(void)sig;
	own_faults++;
	siglongjmp(back, 1);
}

int main(void)
{
	struct ibv_context *ctx = dv_open_devx("mlx5_0");
	struct ibv_alloc_dm_attr attr = { .length = 64 };
	struct ibv_dm *dm = ibv_alloc_dm(ctx, &attr);

	if (!dm)
		SKIP("no device memory: %s", strerror(errno));
	uint8_t zero[64] = { 0 };
	CHECK_EQ(ibv_memcpy_to_dm(dm, 0, zero, sizeof(zero)), 0, "zero the DM");

	/* The program's own handler, installed first, must still get faults of its own. */
	struct sigaction sa = { .sa_handler = own_handler };
	sigemptyset(&sa.sa_mask);
	CHECK(!sigaction(SIGSEGV, &sa, NULL), "sigaction");

	errno = 0;
	CHECK(!mlx5dv_dm_map_op_addr(dm, 2) && errno == EOPNOTSUPP, "op 2: errno %d", errno);
	volatile uint8_t *inc = mlx5dv_dm_map_op_addr(dm, 0);
	if (!inc && errno == EOPNOTSUPP)
		SKIP("no MEMIC operations (EOPNOTSUPP)");
	volatile uint8_t *tas = mlx5dv_dm_map_op_addr(dm, 1);
	CHECK(inc && tas, "mlx5dv_dm_map_op_addr: %s", strerror(errno));
	PASS("increment and test-and-set pages");

	inc[5] = 1;
	inc[5] = 1;
	uint8_t b[64];
	CHECK_EQ(ibv_memcpy_from_dm(b, dm, 0, sizeof(b)), 0, "read the DM");
	CHECK_EQ(b[5], 2, "two increments of 1");
	CHECK_EQ(b[4] | b[6], 0, "the neighbours untouched");
	CHECK_EQ(tas[5], 2, "test-and-set returns the byte");
	CHECK_EQ(tas[5], 0xff, "and left it all ones");
	inc[5] = 3;
	CHECK_EQ(tas[5], 2, "0xff + 3 wraps to 2");
	PASS("the operations on the DM's bytes");

	uint8_t *own = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(own != MAP_FAILED, "mmap");
	if (!sigsetjmp(back, 1))
		*(volatile uint8_t *)own = 1;
	CHECK_EQ(own_faults, 1, "the program's handler saw its own fault");
	PASS("other faults reach the program's handler");

	munmap((void *)inc, 4096);
	munmap((void *)tas, 4096);
	munmap(own, 4096);
	CHECK_EQ(ibv_free_dm(dm), 0, "ibv_free_dm");
	ibv_close_device(ctx);
	return 0;
}
