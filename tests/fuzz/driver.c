// SPDX-License-Identifier: MIT
/*
 * Corpus replayer for builds without libFuzzer: runs the target's
 * LLVMFuzzerTestOneInput once on every regular file of the directories
 * (and on the files) named on the command line, in name order so that a
 * failure is reproducible.  A crash or sanitizer report ends the run with
 * the file's name already printed; exit 0 means every input ran.
 *
 * Usage: fuzz_TARGET [-v] DIR|FILE...
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "fuzz.h"

static bool verbose;

static int read_file(const char *path, uint8_t **data, size_t *len)
{
	struct stat st;
	uint8_t *p;
	size_t got = 0;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out_close_fd;
	}
	/* One extra byte so that an empty file still gets a real buffer. */
	p = malloc((size_t)st.st_size + 1);
	if (!p) {
		r = -ENOMEM;
		goto out_close_fd;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, p + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			free(p);
			goto out_close_fd;
		}
		got += (size_t)n;
	}
	*data = p;
	*len = got;
out_close_fd:
	close(fd);
	return r;
}

static int run_file(const char *path)
{
	uint8_t *data = NULL;
	size_t len = 0;
	int r;

	r = read_file(path, &data, &len);
	if (r < 0) {
		fprintf(stderr, "fuzz driver: cannot read %s: %s\n", path,
			strerror(-r));
		return r;
	}
	if (verbose)
		fprintf(stderr, "fuzz driver: %s (%zu bytes)\n", path, len);
	LLVMFuzzerTestOneInput(data, len);
	free(data);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of `dir`, sorted; returns how many ran or -errno. */
static int run_dir(const char *dir)
{
	char **names = NULL, path[4096];
	size_t n = 0, cap = 0;
	struct dirent *de;
	int ran = 0, r = 0;
	DIR *d;

	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **p;

			cap = cap ? cap * 2 : 64;
			p = realloc(names, cap * sizeof(*names));
			if (!p) {
				r = -ENOMEM;
				goto out_free_names;
			}
			names = p;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			goto out_free_names;
		}
		n++;
	}
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if ((r = run_file(path)) < 0)
			goto out_free_names;
		ran++;
	}
	r = ran;
out_free_names:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return r;
}

int main(int argc, char **argv)
{
	int total = 0, r, i = 1;

	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		verbose = true;
		i++;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: %s [-v] DIR|FILE...\n"
			"Runs the fuzz target once on every corpus file.\n",
			argv[0]);
		return 2;
	}
	for (; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "fuzz driver: %s: %s\n", argv[i],
				strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			r = run_dir(argv[i]);
			if (r < 0) {
				fprintf(stderr, "fuzz driver: %s: %s\n",
					argv[i], strerror(-r));
				return 1;
			}
			total += r;
		} else {
			if (run_file(argv[i]) < 0)
				return 1;
			total++;
		}
	}
	printf("fuzz driver: ran %d inputs\n", total);
	return 0;
}
