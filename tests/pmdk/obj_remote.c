/* SPDX-License-Identifier: BSD-3-Clause */
/* obj_remote: a small libpmemobj client for the PMDK integration tests. It
 * works on any pool set (with or without REPLICA lines) and knows nothing
 * of rpmem: Debian's libpmemobj does the replication through librpmem.so.1.
 *
 *   obj_remote create PATH N SEED   pmemobj_create (size from the pool set),
 *                                   N objects written in transactions, close
 *   obj_remote populate PATH N SEED pmemobj_open an empty pool (made by
 *                                   `pmempool create obj`), then as create
 *   obj_remote rewrite PATH N SEED  pmemobj_open, rewrite every object in
 *                                   one transaction per object, close
 *   obj_remote verify PATH N SEED   pmemobj_open, check the N objects, close
 *   obj_remote churn PATH N SEED STOP
 *                                   pmemobj_open, rewrite every object with
 *                                   SEED, SEED+1, ... until the file STOP
 *                                   exists; prints the last seed written
 *
 * Object i has size object_size(i) and bytes pattern(SEED, i, j); the root
 * object holds the count, the seed and the OIDs. Exit status 0 on success,
 * 1 with a message on stderr otherwise. */
#include <libpmemobj.h>

#include <errno.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT "rpmem-pmdk-test"
#define MAX_OBJS 1024

struct root {
	uint64_t nobjs;
	uint64_t seed;
	PMEMoid objs[MAX_OBJS];
};

/* Seven sizes up to 6 KiB: few allocation classes, so that a small pool
 * (one 256 KiB chunk per class run) has room for hundreds of objects. */
static size_t object_size(uint64_t i) { return 64 + (i % 7) * 1000; }

static uint8_t pattern(uint64_t seed, uint64_t i, size_t j)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (i << 20) ^ j;
	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (uint8_t)x;
}

static void fill(uint8_t *p, uint64_t seed, uint64_t i)
{
	size_t n = object_size(i);
	for (size_t j = 0; j < n; ++j)
		p[j] = pattern(seed, i, j);
}

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "obj_remote: %s %s: %s (errno %d: %s)\n", what, path, pmemobj_errormsg(),
		errno, strerror(errno));
	return 1;
}

static int write_objects(PMEMobjpool *pop, uint64_t n, uint64_t seed, int create)
{
	PMEMoid root_oid = pmemobj_root(pop, sizeof(struct root));
	if (OID_IS_NULL(root_oid))
		return fail("pmemobj_root", "");
	struct root *r = pmemobj_direct(root_oid);
	for (uint64_t i = 0; i < n; ++i) {
		volatile int ok = 1;
		TX_BEGIN(pop) {
			if (create) {
				pmemobj_tx_add_range(root_oid, offsetof(struct root, objs[i]),
						     sizeof(PMEMoid));
				r->objs[i] = pmemobj_tx_alloc(object_size(i), 1);
			} else {
				pmemobj_tx_add_range(r->objs[i], 0, object_size(i));
			}
			fill(pmemobj_direct(r->objs[i]), seed, i);
		} TX_ONABORT {
			ok = 0;
		} TX_END
		if (!ok)
			return fail("transaction", "");
	}
	volatile int ok = 1;
	TX_BEGIN(pop) {
		pmemobj_tx_add_range(root_oid, 0, offsetof(struct root, objs));
		r->nobjs = n;
		r->seed = seed;
	} TX_ONABORT {
		ok = 0;
	} TX_END
	return ok ? 0 : fail("transaction", "root");
}

static int verify(PMEMobjpool *pop, uint64_t n, uint64_t seed)
{
	PMEMoid root_oid = pmemobj_root(pop, sizeof(struct root));
	struct root *r = pmemobj_direct(root_oid);
	if (r == NULL || r->nobjs != n || r->seed != seed) {
		fprintf(stderr, "obj_remote: root holds %llu objects of seed %llu, expected %llu/%llu\n",
			r ? (unsigned long long)r->nobjs : 0ull,
			r ? (unsigned long long)r->seed : 0ull, (unsigned long long)n,
			(unsigned long long)seed);
		return 1;
	}
	for (uint64_t i = 0; i < n; ++i) {
		const uint8_t *p = pmemobj_direct(r->objs[i]);
		if (p == NULL || pmemobj_alloc_usable_size(r->objs[i]) < object_size(i)) {
			fprintf(stderr, "obj_remote: object %llu missing\n", (unsigned long long)i);
			return 1;
		}
		for (size_t j = 0; j < object_size(i); ++j) {
			if (p[j] != pattern(seed, i, j)) {
				fprintf(stderr, "obj_remote: object %llu byte %zu differs\n",
					(unsigned long long)i, j);
				return 1;
			}
		}
	}
	printf("verified %llu objects (seed %llu)\n", (unsigned long long)n,
	       (unsigned long long)seed);
	return 0;
}

int main(int argc, char *argv[])
{
	if (argc != 5 && !(argc == 6 && strcmp(argv[1], "churn") == 0)) {
		fprintf(stderr, "usage: %s create|populate|rewrite|verify PATH N SEED\n"
				"       %s churn PATH N SEED STOP\n", argv[0], argv[0]);
		return 2;
	}
	const char *cmd = argv[1], *path = argv[2];
	uint64_t n = strtoull(argv[3], NULL, 0), seed = strtoull(argv[4], NULL, 0);
	if (n > MAX_OBJS)
		return 2;
	PMEMobjpool *pop;
	int ret;
	if (strcmp(cmd, "create") == 0) {
		pop = pmemobj_create(path, LAYOUT, 0, 0666);
		if (pop == NULL)
			return fail("pmemobj_create", path);
		ret = write_objects(pop, n, seed, 1);
	} else {
		pop = pmemobj_open(path, LAYOUT);
		if (pop == NULL)
			return fail("pmemobj_open", path);
		if (strcmp(cmd, "populate") == 0)
			ret = write_objects(pop, n, seed, 1);
		else if (strcmp(cmd, "rewrite") == 0)
			ret = write_objects(pop, n, seed, 0);
		else if (strcmp(cmd, "churn") == 0) {
			ret = 0;
			uint64_t s = seed;
			for (; ret == 0 && access(argv[5], F_OK) != 0; ++s)
				ret = write_objects(pop, n, s, 0);
			printf("%llu\n", (unsigned long long)(s - 1));
		}
		else
			ret = verify(pop, n, seed);
	}
	pmemobj_close(pop);
	return ret;
}
