/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlopen_soname.c -- what libpmemobj/libpmempool (PMDK <= 1.12) do: load
 * "librpmem.so.1" by soname, look up the 8 names they use, unversioned, and
 * check the API version. Exits 0 when everything matches.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

typedef const char *(*check_version_fn)(unsigned, unsigned);

static int failures;

static void
expect_msg(check_version_fn f, unsigned major, unsigned minor,
		const char *want)
{
	const char *got = f(major, minor);
	if (want == NULL && got != NULL) {
		fprintf(stderr, "rpmem_check_version(%u, %u) = \"%s\", want NULL\n",
				major, minor, got);
		failures++;
	} else if (want != NULL && (got == NULL || strcmp(got, want) != 0)) {
		fprintf(stderr, "rpmem_check_version(%u, %u) = \"%s\", want \"%s\"\n",
				major, minor, got ? got : "(null)", want);
		failures++;
	}
}

int
main(int argc, char *argv[])
{
	static const char *const names[] = {
		"rpmem_create", "rpmem_open", "rpmem_close", "rpmem_persist",
		"rpmem_deep_persist", "rpmem_read", "rpmem_remove",
		"rpmem_set_attr",
	};
	const char *build_dir = argc > 1 ? argv[1] : NULL;
	void *h = dlopen("librpmem.so.1", RTLD_NOW | RTLD_LOCAL);
	size_t i;
	check_version_fn check_version;
	void *sym;

	if (h == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	if (build_dir != NULL) {
		struct link_map *lm = NULL;
		if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL ||
				strncmp(lm->l_name, build_dir, strlen(build_dir)) != 0) {
			fprintf(stderr, "loaded %s, not the one in %s\n",
					lm ? lm->l_name : "?", build_dir);
			failures++;
		}
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (dlsym(h, names[i]) == NULL) {
			fprintf(stderr, "dlsym(%s): %s\n", names[i], dlerror());
			failures++;
		}
		if (dlvsym(h, names[i], "LIBRPMEM_1.0") != dlsym(h, names[i])) {
			fprintf(stderr, "%s is not the LIBRPMEM_1.0 default\n", names[i]);
			failures++;
		}
	}

	sym = dlsym(h, "rpmem_check_version");
	if (sym == NULL) {
		fprintf(stderr, "dlsym(rpmem_check_version): %s\n", dlerror());
		return 1;
	}
	/* ISO C has no void * -> function pointer conversion; POSIX does. */
	memcpy(&check_version, &sym, sizeof(sym));
	expect_msg(check_version, 1, 3, NULL);
	expect_msg(check_version, 1, 0, NULL);
	expect_msg(check_version, 1, 4,
			"librpmem minor version mismatch (need 4, found 3)");
	expect_msg(check_version, 2, 0,
			"librpmem major version mismatch (need 2, found 1)");
	expect_msg(check_version, 0, 0,
			"librpmem major version mismatch (need 0, found 1)");

	if (dlsym(h, "rpmem_inject_fault_at") != NULL) {
		fprintf(stderr, "fault injection symbols are exported\n");
		failures++;
	}
	dlclose(h);
	if (failures == 0)
		printf("dlopen(librpmem.so.1): OK\n");
	return failures ? 1 : 0;
}
