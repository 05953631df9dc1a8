/* SPDX-License-Identifier: MIT */
/*
 * Helper threads (readers, pumps, watchers) must never take a signal meant
 * for the process: libfuse's handlers and the main loop expect SIGINT,
 * SIGTERM and SIGHUP on the main thread.  A thread inherits the mask of its
 * creator, so it is created with every signal blocked.
 */
#ifndef QFT_THREAD_H
#define QFT_THREAD_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

/* pthread_create with all signals blocked in the new thread; 0 or -errno. */
static inline int qft_thread_start(pthread_t *t, void *(*fn)(void *),
				   void *arg)
{
	sigset_t all, old;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -r;
}

/* The CLOCK_REALTIME deadline `ms` from now, for pthread_cond_timedwait. */
static inline void qft_deadline_in(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/*
 * For entry points that require `lock` held: checks, where it is cheap
 * and cannot change the outcome, that somebody holds it (pthreads cannot
 * tell who).  A default mutex held makes trylock fail; success means
 * nobody held it -- the caller's bug -- and the lock is given back before
 * the assertion fails.  Nothing at all with NDEBUG.
 */
static inline void qft_assert_locked(pthread_mutex_t *lock)
{
#ifndef NDEBUG
	int r = pthread_mutex_trylock(lock);

	if (r == 0)
		pthread_mutex_unlock(lock);
	assert(r == EBUSY);
#else
	(void)lock;
#endif
}

#endif /* QFT_THREAD_H */
