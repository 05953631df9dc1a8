/* SPDX-License-Identifier: MIT */
/*
 * Minimal checks for the unit tests.  A failed check prints file:line, the
 * expression, and the current context (set with check_ctx() inside loops so
 * a failure names the opcode or length it was testing), then the test goes
 * on; check_exit() turns the tally into the exit status: 0 pass, 1 fail.
 * A test whose prerequisite is missing exits with T_SKIP (77).
 */
#ifndef QFT_TEST_CHECK_H
#define QFT_TEST_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define T_SKIP 77
/* Past this many failures the rest is noise: stop. */
#define CHECK_MAX_FAILURES 25

static int check_failures;
static unsigned long check_count;
static char check_ctx_buf[256];

__attribute__((format(printf, 1, 2), unused))
static void check_ctx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(check_ctx_buf, sizeof(check_ctx_buf), fmt, ap);
	va_end(ap);
}

__attribute__((unused))
static void check_failed(const char *file, int line, const char *what)
{
	bool ctx = check_ctx_buf[0] != '\0';

	fprintf(stderr, "%s:%d: FAIL: %s%s%s%s\n", file, line, what,
		ctx ? " [" : "", ctx ? check_ctx_buf : "", ctx ? "]" : "");
	if (++check_failures >= CHECK_MAX_FAILURES) {
		fprintf(stderr, "too many failures, giving up\n");
		exit(1);
	}
}

#define CHECK(cond)                                                       \
	do {                                                              \
		check_count++;                                            \
		if (!(cond))                                              \
			check_failed(__FILE__, __LINE__, #cond);          \
	} while (0)

/* Compares as 64-bit integers and prints both values on failure. */
#define CHECK_EQ(a, b)                                                    \
	do {                                                              \
		unsigned long long a_ = (unsigned long long)(a);          \
		unsigned long long b_ = (unsigned long long)(b);          \
		check_count++;                                            \
		if (a_ != b_) {                                           \
			char what_[512];                                  \
			snprintf(what_, sizeof(what_),                    \
				 "%s == %s (%lld/%#llx != %lld/%#llx)",   \
				 #a, #b, (long long)a_, a_,               \
				 (long long)b_, b_);                      \
			check_failed(__FILE__, __LINE__, what_);          \
		}                                                         \
	} while (0)

/*
 * Under -fsanitize=undefined a report only prints and the run goes on to
 * exit 0; make every report fail the test, however it is started.  The
 * runtime looks this hook up by name; without a sanitizer it is unused.
 */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:print_stacktrace=1";
}

/* Prints the tally; the return value is the test's exit status. */
__attribute__((unused))
static int check_exit(const char *name)
{
	if (check_failures) {
		fprintf(stderr, "%s: %d of %lu checks FAILED\n", name,
			check_failures, check_count);
		return 1;
	}
	printf("%s: %lu checks passed\n", name, check_count);
	return 0;
}

#endif /* QFT_TEST_CHECK_H */
