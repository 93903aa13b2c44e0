/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * header_c99.c -- compiles <librpmem.h> as strict C99 (and, through
 * header_cxx.cc, as C++): every macro with its PMDK value, the layout of
 * struct rpmem_pool_attr, and every prototype, checked by the compiler.
 * A mismatch fails the build.
 */
#include <librpmem.h>

#include <stddef.h>

/* C99 has no _Static_assert: a negative array size is a compile error. */
#define ABI_ASSERT(name, cond) typedef char abi_assert_##name[(cond) ? 1 : -1]

ABI_ASSERT(sig_len, RPMEM_POOL_HDR_SIG_LEN == 8);
ABI_ASSERT(uuid_len, RPMEM_POOL_HDR_UUID_LEN == 16);
ABI_ASSERT(user_flags_len, RPMEM_POOL_USER_FLAGS_LEN == 16);
ABI_ASSERT(persist_relaxed, RPMEM_PERSIST_RELAXED == 1U);
ABI_ASSERT(flush_relaxed, RPMEM_FLUSH_RELAXED == 1U);
ABI_ASSERT(remove_force, RPMEM_REMOVE_FORCE == 0x1);
ABI_ASSERT(remove_pool_set, RPMEM_REMOVE_POOL_SET == 0x2);
ABI_ASSERT(major_version, RPMEM_MAJOR_VERSION == 1);
ABI_ASSERT(minor_version, RPMEM_MINOR_VERSION == 3);
ABI_ASSERT(min_pool, RPMEM_MIN_POOL == (size_t)8192);
ABI_ASSERT(min_part, RPMEM_MIN_PART == (size_t)2097152);
ABI_ASSERT(min_pool_is_size_t, sizeof(RPMEM_MIN_POOL) == sizeof(size_t));
ABI_ASSERT(min_part_is_size_t, sizeof(RPMEM_MIN_PART) == sizeof(size_t));

ABI_ASSERT(attr_size, sizeof(struct rpmem_pool_attr) == 104);
ABI_ASSERT(off_signature, offsetof(struct rpmem_pool_attr, signature) == 0);
ABI_ASSERT(off_major, offsetof(struct rpmem_pool_attr, major) == 8);
ABI_ASSERT(off_compat, offsetof(struct rpmem_pool_attr, compat_features) == 12);
ABI_ASSERT(off_incompat, offsetof(struct rpmem_pool_attr, incompat_features) == 16);
ABI_ASSERT(off_ro_compat, offsetof(struct rpmem_pool_attr, ro_compat_features) == 20);
ABI_ASSERT(off_poolset_uuid, offsetof(struct rpmem_pool_attr, poolset_uuid) == 24);
ABI_ASSERT(off_uuid, offsetof(struct rpmem_pool_attr, uuid) == 40);
ABI_ASSERT(off_next_uuid, offsetof(struct rpmem_pool_attr, next_uuid) == 56);
ABI_ASSERT(off_prev_uuid, offsetof(struct rpmem_pool_attr, prev_uuid) == 72);
ABI_ASSERT(off_user_flags, offsetof(struct rpmem_pool_attr, user_flags) == 88);

/* Alignment 4, without C11's _Alignof. */
struct abi_align_probe {
	char c;
	struct rpmem_pool_attr attr;
};
ABI_ASSERT(attr_align, offsetof(struct abi_align_probe, attr) == 4);

/* Field types: sizes of each member. */
ABI_ASSERT(sz_signature, sizeof(((struct rpmem_pool_attr *)0)->signature) == 8);
ABI_ASSERT(sz_major, sizeof(((struct rpmem_pool_attr *)0)->major) == 4);
ABI_ASSERT(sz_user_flags, sizeof(((struct rpmem_pool_attr *)0)->user_flags) == 16);

/*
 * Every function, through a pointer of exactly PMDK's prototype: a changed
 * parameter or return type is an incompatible-pointer error under -Werror.
 */
struct abi_api {
	RPMEMpool *(*create)(const char *, const char *, void *, size_t,
			unsigned *, const struct rpmem_pool_attr *);
	RPMEMpool *(*open)(const char *, const char *, void *, size_t,
			unsigned *, struct rpmem_pool_attr *);
	int (*set_attr)(RPMEMpool *, const struct rpmem_pool_attr *);
	int (*close)(RPMEMpool *);
	int (*flush)(RPMEMpool *, size_t, size_t, unsigned, unsigned);
	int (*drain)(RPMEMpool *, unsigned, unsigned);
	int (*persist)(RPMEMpool *, size_t, size_t, unsigned, unsigned);
	int (*read)(RPMEMpool *, void *, size_t, size_t, unsigned);
	int (*deep_persist)(RPMEMpool *, size_t, size_t, unsigned);
	int (*remove)(const char *, const char *, int);
	const char *(*check_version)(unsigned, unsigned);
	const char *(*errormsg)(void);
};

const struct abi_api *abi_header_api(void);

const struct abi_api *
abi_header_api(void)
{
	static const struct abi_api api = {
		rpmem_create, rpmem_open, rpmem_set_attr, rpmem_close,
		rpmem_flush, rpmem_drain, rpmem_persist, rpmem_read,
		rpmem_deep_persist, rpmem_remove, rpmem_check_version,
		rpmem_errormsg,
	};
	return &api;
}

/*
 * The struct can be written with designated initializers, in declaration
 * order (valid C99 and C++20).
 */
struct rpmem_pool_attr abi_header_attr(void);

struct rpmem_pool_attr
abi_header_attr(void)
{
	struct rpmem_pool_attr a = {
		.signature = {'P', 'M', 'E', 'M', 'O', 'B', 'J', 0},
		.major = 6,
		.compat_features = RPMEM_PERSIST_RELAXED | RPMEM_FLUSH_RELAXED,
		.incompat_features = RPMEM_REMOVE_FORCE | RPMEM_REMOVE_POOL_SET,
		.ro_compat_features = 0,
		.poolset_uuid = {0},
		.uuid = {0},
		.next_uuid = {0},
		.prev_uuid = {0},
		.user_flags = {0},
	};
	return a;
}
