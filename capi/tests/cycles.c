/* Shutdown under the device thread: 1,000 cycles of opening a context, making a PD, CQs, an MR
 * and two connected QPs, moving a message, and closing the context with all of them still
 * live. Afterwards no thread, fd or memory is left behind: the process has its one thread, the
 * fds it had, and an RSS that stayed flat. */
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static int count(const char *dir)
{
	DIR *d = opendir(dir);
	CHECK(d, "opendir %s", dir);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	CHECK(f, "statm");
	long pages = 0, resident = 0;
	CHECK(fscanf(f, "%ld %ld", &pages, &resident) == 2, "statm");
	fclose(f);
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void cycle(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq, "PD, CQ");
	struct ibv_qp *a = rc_qp(ctx, pd, cq, 0), *b = rc_qp(ctx, pd, cq, 0);
	CHECK(a && b, "QPs");
	connect_qp(ctx, a, b);
	connect_qp(ctx, b, a);
	static uint8_t buf[128];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr");
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)buf + 64, .rkey = mr->rkey } },
			   *bad;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "ibv_post_send");
	struct ibv_wc wc = poll_one(cq);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS, "the WRITE");
	/* A second WRITE left in flight, then the close with everything live. */
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "ibv_post_send");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device with live QPs, CQ, MR and PD");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	/* Warm up: the first cycle makes what a process keeps (the device list, the shim). */
	cycle(dev);
	usleep(100000);
	int fds = count("/proc/self/fd");
	long rss = rss_kib();
	for (int i = 0; i < 1000; i++)
		cycle(dev);
	/* The device thread ends once no context is open. */
	int threads = 0;
	for (int i = 0; i < 200 && (threads = count("/proc/self/task") - 2) != 1; i++)
		usleep(10000);
	CHECK_EQ(threads, 1, "threads left after the last close");
	CHECK_EQ(count("/proc/self/fd"), fds, "open fds");
	long grown = rss_kib() - rss;
	CHECK(grown < 4096, "RSS grew by %ld KiB over 1,000 cycles", grown);
	ibv_free_device_list(list);
	printf("PASS: 1000 cycles; 1 thread, %d fds, RSS %+ld KiB\n", fds - 2, grown);
	return 0;
}
