/* What it costs the device thread to find out, without a signal, whether an ODP MR's pages may
 * be read or written (docs/measured.md, "On-demand paging"): madvise(MADV_POPULATE_READ /
 * _WRITE), which the simulator uses, against process_vm_readv of one byte per page, mincore
 * and msync. Each also says what it detects.
 *   cc -O2 capi/benches/odp_fault_cost.c -o /tmp/odp_fault_cost && /tmp/odp_fault_cost */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

enum { N = 100000, PAGE = 4096 };

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void)
{
	char *p = mmap(NULL, 512 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *ro = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || ro == MAP_FAILED)
		return 1;
	munmap(p + 16 * PAGE, PAGE);
	printf("MADV_POPULATE_READ: mapped %d, unmapped %d, read-only %d\n", madvise(p, PAGE, MADV_POPULATE_READ),
	       madvise(p + 16 * PAGE, PAGE, MADV_POPULATE_READ), madvise(ro, PAGE, MADV_POPULATE_READ));
	printf("MADV_POPULATE_WRITE: read-only %d\n", madvise(ro, PAGE, MADV_POPULATE_WRITE));
	unsigned char vec[16];
	printf("mincore: unmapped %d, read-only %d (sees no protection)\n", mincore(p + 16 * PAGE, PAGE, vec),
	       mincore(ro, PAGE, vec));
	double t = now();
	for (int i = 0; i < N; i++)
		madvise(p, PAGE, MADV_POPULATE_WRITE);
	printf("MADV_POPULATE_WRITE, 1 present page: %.0f ns\n", (now() - t) / N);
	t = now();
	for (int i = 0; i < N; i++)
		madvise(p, 16 * PAGE, MADV_POPULATE_READ);
	printf("MADV_POPULATE_READ, 16 pages: %.0f ns\n", (now() - t) / N);
	t = now();
	for (int i = 0; i < N / 10; i++)
		madvise(p + 100 * PAGE, 256 * PAGE, MADV_POPULATE_WRITE);
	printf("MADV_POPULATE_WRITE, 256 pages: %.0f ns\n", (now() - t) / (N / 10));
	char buf[16];
	struct iovec l = { buf, 1 }, r = { p, 1 };
	t = now();
	for (int i = 0; i < N; i++)
		process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	printf("process_vm_readv, 1 byte: %.0f ns\n", (now() - t) / N);
	struct iovec rs[16];
	for (int i = 0; i < 16; i++)
		rs[i] = (struct iovec){ p + i * PAGE, 1 };
	l.iov_len = 16;
	t = now();
	for (int i = 0; i < N; i++)
		process_vm_readv(getpid(), &l, 1, rs, 16, 0);
	printf("process_vm_readv, 1 byte of each of 16 pages: %.0f ns\n", (now() - t) / N);
	t = now();
	for (int i = 0; i < N; i++)
		mincore(p, PAGE, vec);
	printf("mincore, 1 page: %.0f ns\n", (now() - t) / N);
	t = now();
	for (int i = 0; i < N; i++)
		msync(p, PAGE, MS_ASYNC);
	printf("msync, 1 page: %.0f ns\n", (now() - t) / N);
	return 0;
}
