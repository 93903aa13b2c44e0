/* SPDX-License-Identifier: BSD-3-Clause */
/* A program that uses librpmem: prints whether it runs in secure-execution
 * mode (AT_SECURE), then calls rpmem_remove(argv[1], argv[2] or
 * "probe.set", 0) and prints the error message. secure_env_test.cc runs
 * copies of it with file capabilities and without; log_injection_test.cc
 * runs it for a fresh process whose library logs (RPMEM_LOG_*). */
#include <stdio.h>
#include <sys/auxv.h>

#include "librpmem.h"

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) return 2;
  printf("AT_SECURE=%lu\n", getauxval(AT_SECURE));
  int rc = rpmem_remove(argv[1], argc == 3 ? argv[2] : "probe.set", 0);
  printf("rpmem_remove=%d: %s\n", rc, rc ? rpmem_errormsg() : "");
  return 0;
}
