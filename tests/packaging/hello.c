/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hello.c -- a program built against the installed librpmem (pkg-config or
 * find_package): creates a pool, persists a message at offset 4096, reads it
 * back, closes, reopens and checks the attributes.
 *   hello TARGET POOLSET MESSAGE
 */
#include <librpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_SIZE ((size_t)8 << 20)
#define SIGNATURE "RPMEMPKG"

static int fail(const char *what)
{
	fprintf(stderr, "hello: %s: %s\n", what, rpmem_errormsg());
	return 1;
}

int main(int argc, char *argv[])
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s TARGET POOLSET MESSAGE\n", argv[0]);
		return 2;
	}
	const char *msg = rpmem_check_version(RPMEM_MAJOR_VERSION, RPMEM_MINOR_VERSION);
	if (msg) {
		fprintf(stderr, "hello: %s\n", msg);
		return 1;
	}
	char *pool = aligned_alloc(4096, POOL_SIZE);
	char back[256];
	size_t len = strlen(argv[3]) + 1;
	if (!pool || len > sizeof(back))
		return 1;
	memset(pool, 0, POOL_SIZE);

	struct rpmem_pool_attr attr;
	memset(&attr, 0, sizeof(attr));
	memcpy(attr.signature, SIGNATURE, RPMEM_POOL_HDR_SIG_LEN);
	attr.major = 1;
	unsigned nlanes = 2;
	RPMEMpool *rpp = rpmem_create(argv[1], argv[2], pool, POOL_SIZE, &nlanes, &attr);
	if (!rpp)
		return fail("rpmem_create");
	memcpy(pool + 4096, argv[3], len);
	if (rpmem_persist(rpp, 4096, len, nlanes - 1, 0))
		return fail("rpmem_persist");
	if (rpmem_read(rpp, back, 4096, len, 0))
		return fail("rpmem_read");
	if (memcmp(back, argv[3], len) != 0) {
		fprintf(stderr, "hello: read back something else\n");
		return 1;
	}
	if (rpmem_close(rpp))
		return fail("rpmem_close");

	struct rpmem_pool_attr got;
	nlanes = 1;
	rpp = rpmem_open(argv[1], argv[2], pool, POOL_SIZE, &nlanes, &got);
	if (!rpp)
		return fail("rpmem_open");
	if (memcmp(got.signature, SIGNATURE, RPMEM_POOL_HDR_SIG_LEN) != 0 || got.major != 1) {
		fprintf(stderr, "hello: the pool's attributes differ\n");
		return 1;
	}
	if (rpmem_close(rpp))
		return fail("rpmem_close");
	printf("hello: %zu bytes persisted to %s on %s, %u lane(s)\n", len, argv[2], argv[1],
	       nlanes);
	free(pool);
	return 0;
}
