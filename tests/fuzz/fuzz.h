/* SPDX-License-Identifier: MIT */
/*
 * What the fuzz targets share: libFuzzer's entry point, which driver.c
 * also calls when there is no libFuzzer, and the check that turns a
 * broken invariant into a crash libFuzzer keeps the input for.
 */
#ifndef QFT_FUZZ_H
#define QFT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The sanitizers' report channel, when a sanitizer is linked in: libFuzzer
 * run with -close_fd_mask=2 (to silence the code's own logging) closes
 * stderr but keeps that one.
 */
void __sanitizer_report_error_summary(const char *msg)
	__attribute__((weak));

/* Aborts with the failed condition: a finding, not an input error. */
#define FUZZ_CHECK(cond)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			fuzz_check_failed(__FILE__, __LINE__, #cond);     \
		}                                                         \
	} while (0)

__attribute__((noreturn))
static inline void fuzz_check_failed(const char *file, int line,
				     const char *what)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s:%d: fuzz invariant failed: %s", file,
		 line, what);
	fprintf(stderr, "%s\n", msg);
	if (__sanitizer_report_error_summary)
		__sanitizer_report_error_summary(msg);
	abort();
}

#endif /* QFT_FUZZ_H */
