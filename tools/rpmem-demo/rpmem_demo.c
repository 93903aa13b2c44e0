/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpmem-demo -- replicate a local pool to a remote one with the librpmem C
 * API, as an application would: create, persist, flush+drain, close; open,
 * read back, compare. Writes the local pool image to a file so that the
 * caller can compare it with the remote part file.
 *
 * usage: rpmem-demo TARGET POOL_SET LOCAL_IMAGE_FILE
 */
#include <errno.h>
#include <librpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define POOL_SIZE ((size_t)8 << 20)
#define DATA_OFF ((size_t)4096)

static double now_us(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int fail(const char *what) {
	fprintf(stderr, "rpmem-demo: %s failed: %s (errno %d)\n", what, rpmem_errormsg(), errno);
	return 1;
}

int main(int argc, char *argv[]) {
	if (argc != 4) {
		fprintf(stderr, "usage: %s TARGET POOL_SET LOCAL_IMAGE_FILE\n", argv[0]);
		return 2;
	}
	const char *target = argv[1], *set = argv[2];
	unsigned char *pool = mmap(NULL, POOL_SIZE, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pool == MAP_FAILED) return 1;

	struct rpmem_pool_attr attr;
	memset(&attr, 0, sizeof(attr));
	memcpy(attr.signature, "RPMEMDEM", 8);
	attr.major = 1;
	/* Every field set: the target fills zero UUIDs and flags in itself. */
	for (int i = 0; i < 16; i++) {
		attr.poolset_uuid[i] = (unsigned char)(0x90 + i);
		attr.uuid[i] = (unsigned char)(0xa0 + i);
		attr.next_uuid[i] = (unsigned char)(0xb0 + i);
		attr.prev_uuid[i] = (unsigned char)(0xc0 + i);
		attr.user_flags[i] = (unsigned char)(0xd0 + i);
	}

	unsigned nlanes = 4;
	double t0 = now_us();
	RPMEMpool *rpp = rpmem_create(target, set, pool, POOL_SIZE, &nlanes, &attr);
	if (!rpp) return fail("rpmem_create");
	printf("created  %s on %s: %zu MiB, %u lanes (%.0f us)\n", set, target, POOL_SIZE >> 20,
	       nlanes, now_us() - t0);

	/* A message, then 4 MiB of pseudo-random bytes. */
	time_t now = time(NULL);
	int n = snprintf((char *)pool + DATA_OFF, 256, "Hello from rpmem, written %s", ctime(&now));
	srand(42);
	for (size_t i = DATA_OFF + 256; i < DATA_OFF + 256 + (4u << 20); i++)
		pool[i] = (unsigned char)rand();

	t0 = now_us();
	if (rpmem_persist(rpp, DATA_OFF, (size_t)n + 1, 0, 0)) return fail("rpmem_persist");
	printf("persist  %d bytes at offset %zu (%.0f us)\n", n + 1, DATA_OFF, now_us() - t0);

	t0 = now_us();
	if (rpmem_persist(rpp, DATA_OFF + 256, 4u << 20, 1, RPMEM_PERSIST_RELAXED))
		return fail("rpmem_persist");
	printf("persist  4 MiB relaxed on lane 1 (%.0f us)\n", now_us() - t0);

	t0 = now_us();
	for (unsigned i = 0; i < 16; i++) {
		size_t off = (6u << 20) + i * 4096;
		memset(pool + off, 'a' + (int)i, 4096);
		if (rpmem_flush(rpp, off, 4096, 2, 0)) return fail("rpmem_flush");
	}
	if (rpmem_drain(rpp, 2, 0)) return fail("rpmem_drain");
	printf("flush    16 x 4 KiB + drain on lane 2 (%.0f us)\n", now_us() - t0);

	memset(pool + (7u << 20), 0x5a, 65536);
	if (rpmem_deep_persist(rpp, 7u << 20, 65536, 3)) return fail("rpmem_deep_persist");
	printf("deep     64 KiB on lane 3\n");
	if (rpmem_close(rpp)) return fail("rpmem_close");
	printf("closed\n");

	struct rpmem_pool_attr got;
	rpp = rpmem_open(target, set, pool, POOL_SIZE, &nlanes, &got);
	if (!rpp) return fail("rpmem_open");
	printf("opened   signature '%.8s', major %u, attributes %s\n", got.signature, got.major,
	       memcmp(&got, &attr, sizeof(got)) == 0 ? "as created" : "DIFFERENT");
	unsigned char *back = malloc(POOL_SIZE);
	if (!back) return 1;
	t0 = now_us();
	if (rpmem_read(rpp, back + DATA_OFF, DATA_OFF, POOL_SIZE - DATA_OFF, 0))
		return fail("rpmem_read");
	printf("read     %zu MiB back (%.0f us): %s\n", (POOL_SIZE - DATA_OFF) >> 20,
	       now_us() - t0,
	       memcmp(back + DATA_OFF, pool + DATA_OFF, POOL_SIZE - DATA_OFF) == 0
		       ? "identical to the local pool"
		       : "DIFFERENT from the local pool");
	printf("remote says: %s", (char *)back + DATA_OFF);
	if (rpmem_close(rpp)) return fail("rpmem_close");

	FILE *img = fopen(argv[3], "wb");
	if (!img || fwrite(pool, 1, POOL_SIZE, img) != POOL_SIZE || fclose(img)) {
		perror(argv[3]);
		return 1;
	}
	free(back);
	return 0;
}
