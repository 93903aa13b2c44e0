/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * librpmem.h -- the librpmem C API (API version 1.3), as in PMDK 1.11.
 *
 * A program or library built against PMDK's librpmem builds and runs
 * unchanged against this one. Every function that fails sets errno to a
 * positive value and leaves a thread-local message for rpmem_errormsg().
 * The man pages (librpmem(7), rpmem_*(3)) have the full contracts.
 */
#ifndef LIBRPMEM_H
#define LIBRPMEM_H 1

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rpmem_pool RPMEMpool;

#define RPMEM_POOL_HDR_SIG_LEN 8
#define RPMEM_POOL_HDR_UUID_LEN 16 /* uuid byte length */
#define RPMEM_POOL_USER_FLAGS_LEN 16

struct rpmem_pool_attr {
  char signature[RPMEM_POOL_HDR_SIG_LEN];              /* pool signature */
  uint32_t major;                                      /* format major version number */
  uint32_t compat_features;                            /* mask: compatible "may" features */
  uint32_t incompat_features;                          /* mask: "must support" features */
  uint32_t ro_compat_features;                         /* mask: force RO if unsupported */
  unsigned char poolset_uuid[RPMEM_POOL_HDR_UUID_LEN]; /* pool uuid */
  unsigned char uuid[RPMEM_POOL_HDR_UUID_LEN];         /* first part uuid */
  unsigned char next_uuid[RPMEM_POOL_HDR_UUID_LEN];    /* next pool uuid */
  unsigned char prev_uuid[RPMEM_POOL_HDR_UUID_LEN];    /* prev pool uuid */
  unsigned char user_flags[RPMEM_POOL_USER_FLAGS_LEN]; /* user flags */
};

/*
 * rpmem_create, rpmem_open -- return a handle, or NULL with errno set:
 * EINVAL (bad argument or target), ENOMEDIUM (no usable transport),
 * ECONNRESET (ssh or rpmemd failed to start), or the target's status:
 * ENOENT, EACCES, EEXIST, EBUSY, EFBIG, EREMOTEIO, ECONNABORTED, EPROTO.
 */
RPMEMpool *rpmem_create(const char *target, const char *pool_set_name, void *pool_addr,
                        size_t pool_size, unsigned *nlanes,
                        const struct rpmem_pool_attr *create_attr);

RPMEMpool *rpmem_open(const char *target, const char *pool_set_name, void *pool_addr,
                      size_t pool_size, unsigned *nlanes, struct rpmem_pool_attr *open_attr);

/* 0 on success; -1 with errno EINVAL, ECONNRESET or the target's status */
int rpmem_set_attr(RPMEMpool *rpp, const struct rpmem_pool_attr *attr);

/* frees the handle whatever happens; 0, or -1 with errno */
int rpmem_close(RPMEMpool *rpp);

#define RPMEM_PERSIST_RELAXED (1U << 0)
#define RPMEM_FLUSH_RELAXED (1U << 0)

/*
 * rpmem's durability levels for one call (not in PMDK; rpmem_persist(3)):
 * acknowledged once visible in the target's memory, or once persistent.
 * Without either a call takes the pool's level (RPMEM_DURABILITY, by
 * default persistent); with both it fails with EINVAL. Where the target
 * does not grant the visible level, a visible call is persistent.
 */
#define RPMEM_PERSIST_VISIBLE (1U << 1)
#define RPMEM_PERSIST_PERSISTENT (1U << 2)
#define RPMEM_FLUSH_VISIBLE (1U << 1)
#define RPMEM_FLUSH_PERSISTENT (1U << 2)
#define RPMEM_DRAIN_VISIBLE (1U << 1)
#define RPMEM_DRAIN_PERSISTENT (1U << 2)

/*
 * Data path: 0 on success; -1 with errno EINVAL (bad lane, range or flags;
 * the handle stays usable), ECONNRESET (the connection is lost; every later
 * call fails the same way) or EIO (the target could not make data durable).
 */
int rpmem_flush(RPMEMpool *rpp, size_t offset, size_t length, unsigned lane, unsigned flags);
int rpmem_drain(RPMEMpool *rpp, unsigned lane, unsigned flags);

int rpmem_persist(RPMEMpool *rpp, size_t offset, size_t length, unsigned lane, unsigned flags);
int rpmem_read(RPMEMpool *rpp, void *buff, size_t offset, size_t length, unsigned lane);
int rpmem_deep_persist(RPMEMpool *rpp, size_t offset, size_t length, unsigned lane);

#define RPMEM_REMOVE_FORCE 0x1
#define RPMEM_REMOVE_POOL_SET 0x2

/* 0, or -1 with errno EINVAL (flags, target) or the remote exit status */
int rpmem_remove(const char *target, const char *pool_set, int flags);

/* the librpmem API version this header describes */
#define RPMEM_MAJOR_VERSION 1
#define RPMEM_MINOR_VERSION 3

/* NULL when compatible, otherwise a message (thread-local buffer) */
const char *rpmem_check_version(unsigned major_required, unsigned minor_required);

/* the last error message of the calling thread; never NULL */
const char *rpmem_errormsg(void);

/* minimum size of a pool */
#define RPMEM_MIN_POOL ((size_t)(1024 * 8)) /* 8 KB */

/*
 * This limit is set arbitrary to incorporate a pool header and required
 * alignment plus supply.
 */
#define RPMEM_MIN_PART ((size_t)(1024 * 1024 * 2)) /* 2 MiB */

#ifdef __cplusplus
}
#endif
#endif /* librpmem.h */
