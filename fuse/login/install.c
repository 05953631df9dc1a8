// SPDX-License-Identifier: MIT
/* Installing the server on the remote host over the ssh session (see
 * install.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "chan.h"
#include "config.h"
#include "login/install.h"
#include "login/lineio.h"
#include "log.h"
#include "protocol.h"

#define SERVER_NAME      "qftfs-server"
/* Lines of the script: paths of the remote host, a reason. */
#define LINE_MAX_REMOTE  1024
/* Start-up of sh, uname, od: the greeting's own allowance. */
#define FIRST_TIMEOUT_MS 30000
/* After the upload the board reads it back for its digest and runs it
 * once: seconds on a Pi Zero, a minute under emulation. */
#define AFTER_TIMEOUT_MS 180000
/* Larger than any server build by far; a bigger file is a mistake. */
#define BINARY_MAX       (64u * 1024u * 1024u)

/*
 * The remote side.  POSIX sh as busybox ash has it; no single quote (the
 * client quotes the whole script in them) and nothing bash-only.  Each
 * step is explained in install.h.
 */
static const char script[] =
	/* -f: words of ls output are never file name patterns. */
	"set -f\n"
	"p=$1 v=$2 r=$3 o=${4:+--follow-symlinks}\n"
	"say() { echo \"QFTFS-$*\"; }\n"
	"run() { say \"RUN $1\"; exec \"$1\" $o --session --root \"$r\"; }\n"
	"ours() { \"$1\" --version 2>/dev/null | grep -F -q \"(protocol v$p)\"; }\n"
	"s=$(command -v " SERVER_NAME " 2>/dev/null)\n"
	"case $s in /*) if ours \"$s\"; then run \"$s\"; fi;; esac\n"
	"m=$(uname -m 2>/dev/null)\n"
	"e=$(od -An -tx1 -j36 -N4 /bin/sh 2>/dev/null | tr -d \" \\n\")\n"
	"l=-\n"
	"if [ -e /lib/ld-linux-armhf.so.3 ]; then l=hf; "
	"elif [ -e /lib/ld-linux.so.3 ]; then l=el; fi\n"
	"h=none\n"
	"if command -v sha256sum >/dev/null 2>&1; then h=sha256; "
	"elif command -v cksum >/dev/null 2>&1; then h=cksum; fi\n"
	"say \"ARCH ${m:--} ${e:--} $l $h\"\n"
	"read -r a n x || exit 1\n"
	"case $a in -|*[!a-z0-9_]*) exit 3;; esac\n"
	"case $n in *[!0-9]*) exit 3;; esac\n"
	"sum() {\n"
	"  case $h in\n"
	"  sha256) set -- $(sha256sum < \"$1\");;\n"
	"  cksum) set -- $(cksum < \"$1\"); set -- \"$1.$2\";;\n"
	"  *) set -- $(($(wc -c < \"$1\")));;\n"
	"  esac\n"
	"  echo \"$1\"\n"
	"}\n"
	"u=$(id -u)\n"
	"c=${XDG_CACHE_HOME:-$HOME/.cache}/qftfs\n"
	/* Nothing in the cache is trusted unless nobody but the user (or
	 * root) can change it: the directory is the user's, and neither it
	 * nor any directory above it is writable by anyone else (a parent
	 * may be root's and sticky, as /tmp).  Then what is checked is what
	 * runs: no one else can swap it in between.  why() says why a path
	 * fails that, or nothing. */
	"why() {\n"
	"  set -- \"$1\" \"$2\" $(ls -ldn \"$1\" 2>/dev/null)\n"
	"  [ -n \"$3\" ] || { echo \"$1 is missing\"; return; }\n"
	"  case $3 in l*) echo \"$1 is a symlink\"; return;; *+) echo \"$1 has "
	"an ACL\"; return;; esac\n"
	"  [ \"$5\" = \"$u\" ] || { [ \"$2\" = up ] && [ \"$5\" = 0 ]; } || "
	"{ echo \"$1 belongs to uid $5, not $u\"; return; }\n"
	"  case $3 in ?????w*|????????w*) [ \"$2\" = up ] && [ \"$5\" = 0 ] && "
	"case $3 in ?????????[tT]*) return;; esac; "
	"echo \"$1 is writable by others ($3)\";; esac\n"
	"}\n"
	/* The physical path of $1 in $q when it and every directory above
	 * it pass why(); else the reason in $y. */
	"trusted() {\n"
	"  q=$(cd \"$1\" 2>/dev/null && pwd -P) || { y=\"$1 is missing and "
	"cannot be made\"; return 1; }\n"
	"  y=$(why \"$q\" own); [ -z \"$y\" ] || return 1\n"
	"  k=$q\n"
	"  while [ -n \"$k\" ] && [ \"$k\" != / ]; do\n"
	"    k=${k%/*}; y=$(why \"${k:-/}\" up); [ -z \"$y\" ] || return 1\n"
	"  done\n"
	"}\n"
	"set -- \"$c\" \"${TMPDIR:-/tmp}/qftfs-$u\" \"/var/tmp/qftfs-$u\" "
	"\"/dev/shm/qftfs-$u\"\n"
	/* A cached copy where one of them has it already. */
	"for d; do\n"
	"  [ -d \"$d\" ] && trusted \"$d\" || continue\n"
	"  f=$q/$v-$a/" SERVER_NAME "\n"
	"  if [ -z \"$(why \"${f%/*}\" own)\" ] && [ -f \"$f\" ] && "
	"[ -z \"$(why \"$f\" own)\" ] && [ -x \"$f\" ] && "
	"[ \"$(sum \"$f\")\" = \"$x\" ]; then run \"$f\"; fi\n"
	"done\n"
	/* Else the first that can be made trusted takes the upload. */
	"t= w=\n"
	"for d; do\n"
	"  mkdir -p -m 700 \"$d\" 2>/dev/null\n"
	"  if trusted \"$d\"; then\n"
	"    e=$q/$v-$a\n"
	"    mkdir -m 700 \"$e\" 2>/dev/null\n"
	"    y=$(why \"$e\" own)\n"
	"    if [ -z \"$y\" ]; then\n"
	"      : 2>/dev/null > \"$e/." SERVER_NAME ".$$\" && "
	"{ t=$e/." SERVER_NAME ".$$; break; }\n"
	"      y=\"$e is not writable\"\n"
	"    fi\n"
	"  fi\n"
	"  [ \"$d\" = \"$c\" ] && [ -z \"$HOME$XDG_CACHE_HOME\" ] && "
	"y=\"HOME is not set, and $y\"\n"
	"  w=\"$w; $y\"\n"
	"  [ \"$d\" = \"$c\" ] && say \"NOTE not using $c for the server cache: "
	"$y\"\n"
	"done\n"
	"[ -n \"$t\" ] || { say \"FAIL no writable directory of your own for "
	"the cache (tried $*$w)\"; exit 4; }\n"
	"say \"SEND ${t%/*}\"\n"
	/* dd reads at most bs bytes: never past the file, into what the
	 * server must read next. */
	"k=0\n"
	"while [ \"$k\" -lt \"$n\" ]; do\n"
	"  dd bs=$((n - k)) count=1 2>/dev/null >> \"$t\" || break\n"
	"  j=$(($(wc -c < \"$t\")))\n"
	"  [ \"$j\" -gt \"$k\" ] || break\n"
	"  k=$j\n"
	"done\n"
	"if [ \"$(sum \"$t\")\" != \"$x\" ]; then rm -f \"$t\"; "
	"say \"FAIL the upload arrived damaged ($h digest differs after $k of "
	"$n bytes; is dd missing?)\"; exit 5; fi\n"
	"chmod 755 \"$t\"\n"
	"if ours \"$t\" && mv -f \"$t\" \"${t%/*}/" SERVER_NAME "\"; then "
	"say \"INSTALLED ${t%/*}/" SERVER_NAME "\"; "
	"exec \"${t%/*}/" SERVER_NAME "\" $o --session --root \"$r\"; fi\n"
	"rm -f \"$t\"\n"
	"say \"FAIL the uploaded server does not run from ${t%/*} (a noexec "
	"mount?)\"\n"
	"exit 6\n";

const char *qc_install_script(void)
{
	return script;
}

int qc_install_parse(const char *s, bool *enabled)
{
	if (strcmp(s, "yes") == 0)
		*enabled = true;
	else if (strcmp(s, "no") == 0)
		*enabled = false;
	else
		return -EINVAL;
	return 0;
}

const char *qc_install_native_arch(void)
{
#if defined(__x86_64__)
	return "x86_64";
#elif defined(__aarch64__)
	return "aarch64";
#elif defined(__arm__) && defined(__ARM_PCS_VFP)
	return "armhf";
#elif defined(__arm__)
	return "armel";
#else
	return NULL;
#endif
}

/* The ARM architecture version of "armv7l", "armv6l", "armv5tejl", or 0. */
static int arm_version(const char *m)
{
	if (strncmp(m, "armv", 4) != 0 || m[4] < '1' || m[4] > '9')
		return 0;
	return m[4] - '0';
}

const char *qc_install_pick_arch(const char *machine, const char *eflags,
				 const char *ld)
{
	int v;

	if (strcmp(machine, "x86_64") == 0 || strcmp(machine, "amd64") == 0)
		return "x86_64";
	if (strcmp(machine, "aarch64") == 0 || strcmp(machine, "arm64") == 0)
		return "aarch64";
	v = arm_version(machine);
	if (!v)
		return NULL;
	/* Debian's armhf is ARMv7 code: an ARMv6 (Pi Zero, Pi 1) runs
	 * armel, whatever its userland's float ABI (Raspbian's is hard). */
	if (v < 7)
		return "armel";
	/* e_flags, little-endian: 0x400 hard float, 0x200 soft float. */
	if (strlen(eflags) == 8) {
		unsigned b1;

		if (sscanf(eflags + 2, "%2x", &b1) == 1) {
			if (b1 & 0x04)
				return "armhf";
			if (b1 & 0x02)
				return "armel";
		}
	}
	if (strcmp(ld, "el") == 0)
		return "armel";
	return "armhf";
}

/* Where this binary lives, with a trailing '/', or "" when unknown. */
static void self_dir(char *buf, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", buf, size - 1);
	char *slash;

	if (n <= 0) {
		buf[0] = '\0';
		return;
	}
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (slash)
		slash[1] = '\0';
	else
		buf[0] = '\0';
}

static bool regular_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *qc_install_find(const struct qc_install_opts *o, const char *arch,
		      char *looked, size_t looked_size, int *err)
{
	const char *native = qc_install_native_arch();
	char self[PATH_MAX], *cand[6] = { NULL };
	size_t n = 0, used = 0;
	char *found = NULL;

	self_dir(self, sizeof(self));
	if (o->server_binaries) {
		if (asprintf(&cand[n], "%s/%s/%s", o->server_binaries, arch,
			     SERVER_NAME) >= 0)
			n++;
		if (asprintf(&cand[n], "%s/%s-%s", o->server_binaries,
			     SERVER_NAME, arch) >= 0)
			n++;
	}
	/* Our own architecture: the server of the same build, installed
	 * beside us or in the build tree (build/fuse/, build/server/). */
	if (native && strcmp(native, arch) == 0 && self[0]) {
		if (asprintf(&cand[n], "%s%s", self, SERVER_NAME) >= 0)
			n++;
		if (asprintf(&cand[n], "%s../server/%s", self, SERVER_NAME) >= 0)
			n++;
	}
	if (asprintf(&cand[n], "%s/%s/%s", QC_SERVERS_DIR, arch,
		     SERVER_NAME) >= 0)
		n++;
	/* The source tree's cross builds, for a client run from its build
	 * tree only: an installed one has no business there. */
	if (strcmp(self, QC_BUILD_FUSE_DIR) == 0 &&
	    asprintf(&cand[n], "%s/servers/%s/%s", QC_CROSS_DIR, arch,
		     SERVER_NAME) >= 0)
		n++;

	if (looked_size)
		looked[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (!found && regular_file(cand[i])) {
			found = realpath(cand[i], NULL);
			if (!found)
				found = strdup(cand[i]);
		}
		if (used < looked_size) {
			int w = snprintf(looked + used, looked_size - used,
					 "%s%s", i ? ", " : "", cand[i]);

			if (w > 0)
				used += (size_t)w;
		}
		free(cand[i]);
	}
	*err = found ? 0 : (n ? -ENOENT : -ENOMEM);
	return found;
}

/* ------------------------------------------------------------------------
 * Digests as the board computes them
 */

enum hash_kind { HASH_SHA256, HASH_CKSUM, HASH_SIZE };

/* POSIX cksum: CRC-32 (polynomial 0x04C11DB7, most significant bit
 * first) over the data and then its length, least significant byte first
 * and only as many bytes as it needs; the result inverted. */
static uint32_t crc_step(uint32_t crc, uint8_t byte)
{
	crc ^= (uint32_t)byte << 24;
	for (int i = 0; i < 8; i++)
		crc = crc & 0x80000000u ? (crc << 1) ^ 0x04C11DB7u : crc << 1;
	return crc;
}

static int digest(const uint8_t *data, size_t len, enum hash_kind kind,
		  char *out, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	uint32_t crc = 0;

	switch (kind) {
	case HASH_SHA256:
		if (size < 65 ||
		    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1)
			return -EIO;
		for (unsigned i = 0; i < mdlen; i++) {
			out[2 * i] = hex[md[i] >> 4];
			out[2 * i + 1] = hex[md[i] & 15];
		}
		out[2 * mdlen] = '\0';
		return 0;
	case HASH_CKSUM:
		for (size_t i = 0; i < len; i++)
			crc = crc_step(crc, data[i]);
		for (size_t l = len; l; l >>= 8)
			crc = crc_step(crc, (uint8_t)(l & 0xff));
		snprintf(out, size, "%u.%zu", (unsigned)~crc, len);
		return 0;
	case HASH_SIZE:
		snprintf(out, size, "%zu", len);
		return 0;
	}
	return -EINVAL;
}

/* The whole file, at most BINARY_MAX bytes. */
static int slurp(const char *path, uint8_t **data, size_t *len)
{
	struct stat st;
	size_t got = 0;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out_close;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > BINARY_MAX) {
		r = -EFBIG;
		goto out_close;
	}
	*data = malloc((size_t)st.st_size);
	if (!*data) {
		r = -ENOMEM;
		goto out_close;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, *data + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			free(*data);
			*data = NULL;
			goto out_close;
		}
		got += (size_t)n;
	}
	*len = got;
	r = 0;
out_close:
	close(fd);
	return r;
}

/* ------------------------------------------------------------------------
 * The exchange
 */

/* A word of the ARCH line: short, printable, no blanks. */
static bool word_ok(const char *w, size_t max)
{
	size_t n = strlen(w);

	if (!n || n > max)
		return false;
	for (; *w; w++)
		if ((unsigned char)*w <= ' ' || (unsigned char)*w >= 0x7f)
			return false;
	return true;
}

/* Non-printable bytes of a remote line become '?' before it is shown. */
static void sanitize(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || (unsigned char)*s >= 0x7f)
			*s = '?';
}

/* "QFTFS-<tag> <rest>": the rest, or NULL. */
static const char *tagged(const char *line, const char *tag)
{
	size_t n = strlen(tag);

	if (strncmp(line, "QFTFS-", 6) != 0 || strncmp(line + 6, tag, n) != 0)
		return NULL;
	if (line[6 + n] != ' ' || !line[7 + n])
		return NULL;
	return line + 7 + n;
}

/* NOTE lines (what the script wants the user to know) before the next
 * line that matters: more than this is not the script talking. */
#define NOTES_MAX 8

static int next_line(int fd, const char *host, char *line, size_t size,
		     int timeout_ms)
{
	const char *note;
	int r, notes = 0;

again:
	r = qc_line_read(fd, line, size, timeout_ms);

	if (r == -EPIPE && !line[0])
		return -EPIPE;
	if (r == -ETIMEDOUT) {
		qft_err("installing qftfs-server on %s: no answer within %d s",
			host, timeout_ms / 1000);
		return r;
	}
	if (r < 0 && r != -EPIPE && r != -EMSGSIZE) {
		qft_err("installing qftfs-server on %s: %s", host,
			strerror(-r));
		return r;
	}
	if (r < 0 || strncmp(line, "QFTFS-", 6) != 0) {
		sanitize(line);
		qft_err("unexpected output from %s while looking for "
			"qftfs-server: '%s' (does a login script print to "
			"stdout?)", host, line);
		return -EPROTO;
	}
	if ((note = tagged(line, "NOTE")) && notes++ < NOTES_MAX) {
		sanitize(line);
		qft_warn("%s: %s", host, note);
		line[0] = '\0';
		goto again;
	}
	return 0;
}

/* The server's path from a RUN or INSTALLED line, when it fits. */
static void keep_path(const char *rest, char *ran, size_t ran_size)
{
	if (ran_size && strlen(rest) < ran_size)
		memcpy(ran, rest, strlen(rest) + 1);
}

/* A line that ends the script's part: RUN, INSTALLED or FAIL. */
static int final_line(const char *host, char *line, const char *arch,
		      const char *from, char *ran, size_t ran_size)
{
	const char *rest;

	sanitize(line);
	if ((rest = tagged(line, "RUN"))) {
		qft_debug("qftfs-server on %s: %s", host, rest);
		keep_path(rest, ran, ran_size);
		return 0;
	}
	if ((rest = tagged(line, "INSTALLED"))) {
		qft_info("installed qftfs-server %s for %s on %s as %s (from %s)",
			 QFT_VERSION_STRING, arch, host, rest, from);
		keep_path(rest, ran, ran_size);
		return 0;
	}
	if ((rest = tagged(line, "FAIL"))) {
		qft_err("cannot install qftfs-server on %s: %s; give a "
			"server there with -o server=PATH", host, rest);
		return -EIO;
	}
	qft_err("unexpected answer from %s while installing qftfs-server: "
		"'%s'", host, line);
	return -EPROTO;
}

int qc_install_run(int fd, const char *host, const struct qc_install_opts *o,
		   char *ran, size_t ran_size)
{
	char line[LINE_MAX_REMOTE], looked[2048], sum[80], reply[160];
	char machine[65], eflags[17], ld[8], hash[8];
	const char *arch, *rest;
	enum hash_kind kind;
	uint8_t *data = NULL;
	char *path = NULL;
	size_t len = 0;
	int r;

	if (ran_size)
		ran[0] = '\0';
	line[0] = '\0';
	if ((r = next_line(fd, host, line, sizeof(line), FIRST_TIMEOUT_MS)) < 0)
		return r;
	if (tagged(line, "RUN"))
		return final_line(host, line, NULL, NULL, ran, ran_size);
	rest = tagged(line, "ARCH");
	if (!rest || sscanf(rest, "%64s %16s %7s %7s", machine, eflags, ld,
			    hash) != 4 ||
	    !word_ok(machine, 64) || !word_ok(eflags, 16) ||
	    !word_ok(ld, 7) || !word_ok(hash, 7))
		return final_line(host, line, NULL, NULL, ran, ran_size);
	if (strcmp(hash, "sha256") == 0)
		kind = HASH_SHA256;
	else if (strcmp(hash, "cksum") == 0)
		kind = HASH_CKSUM;
	else
		kind = HASH_SIZE;

	arch = qc_install_pick_arch(machine, eflags, ld);
	if (!arch) {
		qft_err("%s is a %s machine, for which qftfs has no server "
			"build; install qftfs-server there and give -o "
			"server=PATH", host, machine);
		r = -ENOEXEC;
		goto out_decline;
	}
	path = qc_install_find(o, arch, looked, sizeof(looked), &r);
	if (!path) {
		qft_err("%s has no qftfs-server of protocol v%u, and no %s "
			"build was found here to install (looked in %s); "
			"build one with `bash scripts/cross-server.sh %s`, give "
			"its directory with -o server_binaries=DIR, or give a "
			"server on %s with -o server=PATH", host, QFT_VERSION,
			arch, looked, arch, host);
		goto out_decline;
	}
	r = slurp(path, &data, &len);
	if (r < 0) {
		qft_err("cannot read %s: %s", path,
			r == -EFBIG ? "not a server binary (empty or larger "
			"than 64 MiB)" : strerror(-r));
		goto out_decline;
	}
	if ((r = digest(data, len, kind, sum, sizeof(sum))) < 0) {
		qft_err("cannot compute the digest of %s", path);
		goto out_decline;
	}
	if (kind == HASH_SIZE)
		qft_warn("%s has neither sha256sum nor cksum: the upload to it "
			 "is checked by its size only", host);
	snprintf(reply, sizeof(reply), "%s %zu %s\n", arch, len, sum);
	if ((r = qft_write_all(fd, reply, strlen(reply))) < 0)
		goto out_lost;

	line[0] = '\0';
	if ((r = next_line(fd, host, line, sizeof(line), FIRST_TIMEOUT_MS)) < 0)
		goto out_free;
	if (tagged(line, "SEND")) {
		qft_debug("uploading %s (%zu bytes; candidates: %s) to %s",
			  path, len, looked, host);
		if ((r = qft_write_all(fd, data, len)) < 0)
			goto out_lost;
		line[0] = '\0';
		r = next_line(fd, host, line, sizeof(line), AFTER_TIMEOUT_MS);
		if (r < 0)
			goto out_free;
	}
	r = final_line(host, line, arch, path, ran, ran_size);
	goto out_free;

out_decline:
	/* The script exits on "-": nothing is left on the board. */
	(void)qft_write_all(fd, "- 0 -\n", 6);
	r = r < 0 ? r : -ENOENT;
	goto out_free;
out_lost:
	/* The script may have given up (and said why) before it read all
	 * we sent: its last words are still in our socket buffer. */
	line[0] = '\0';
	if (qc_line_read(fd, line, sizeof(line), 2000) >= 0 &&
	    tagged(line, "FAIL")) {
		r = final_line(host, line, arch, path, ran, ran_size);
		goto out_free;
	}
	qft_err("installing qftfs-server on %s: the ssh channel failed: %s",
		host, strerror(-r));
out_free:
	free(data);
	free(path);
	return r;
}
