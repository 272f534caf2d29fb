/* How the server of a two-process DC test tells its client where its DCT is: one line of a
 * file (the DCT number, an address, its rkey, the port's GID), written under another name and
 * renamed, so the client never reads half of it. */
#ifndef MLX5SIM_TEST_DCT_FILE_H
#define MLX5SIM_TEST_DCT_FILE_H

#include <unistd.h>

#include "../common.h"

struct dct_addr {
	unsigned dctn;
	unsigned long long addr;
	unsigned rkey;
	union ibv_gid gid;
};

static void dct_file_write(const char *path, uint32_t dctn, const void *addr, uint32_t rkey,
			   const union ibv_gid *gid)
{
	char tmp[4096];

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	CHECK(f, "fopen %s", tmp);
	fprintf(f, "%u %llu %u", dctn, (unsigned long long)(uintptr_t)addr, rkey);
	for (int i = 0; i < 16; i++)
		fprintf(f, " %u", gid->raw[i]);
	fprintf(f, "\n");
	fclose(f);
	CHECK_EQ(rename(tmp, path), 0, "rename");
}

/* Waits up to 30 s for the server's file. */
static struct dct_addr dct_file_read(const char *path)
{
	struct dct_addr d;
	unsigned g[16];
	FILE *f = NULL;

	for (int i = 0; i < 300 && !f; i++) {
		f = fopen(path, "r");
		if (!f)
			usleep(100000);
	}
	CHECK(f, "the server's file %s never came", path);
	int got = fscanf(f, "%u %llu %u", &d.dctn, &d.addr, &d.rkey);
	for (int i = 0; i < 16 && got >= 0; i++)
		got += fscanf(f, "%u", &g[i]);
	fclose(f);
	CHECK_EQ(got, 19, "the fields of the server's file");
	for (int i = 0; i < 16; i++)
		d.gid.raw[i] = (uint8_t)g[i];
	return d;
}

#endif
