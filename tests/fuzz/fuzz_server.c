// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the server's request loop (server/loop.c, ops.c and what
 * they call) serving a real directory, as qftfs-server --stdio does.
 *
 * Input: one byte of options, then the byte stream the client sends.
 *   bit 0  resolve paths by the component walk instead of openat2
 *   bit 1  the harness sends a valid HELLO first (else the input must)
 *   bit 2  file I/O through io_uring where the kernel allows it (--io=auto)
 *          instead of pread/pwrite (--io=posix)
 *   bit 3  that HELLO asks for lz4 (QFT_FEAT_LZ4): the stream may then
 *          carry QFT_F_LZ4 frames, and large replies come compressed
 *   bit 4  ... with the auto policy (QFT_FEAT_LZ4_AUTO)
 *   bit 5  follow mode (--follow-symlinks): every symlink is followed,
 *          wherever it leads.  Only as root with the private tmpfs: the
 *          server's thread then has the jail as its root directory
 *          (unshare(CLONE_FS) and chroot, that thread alone), so "/"
 *          and "../.." lead into the jail and nowhere else; the jail is
 *          rebuilt after such an input.  Otherwise the bit is ignored.
 *   bit 6  the session has change notification (a struct srv_watch, as
 *          main.c makes), and the harness's HELLO asks for NOTIFY,
 *          PROGRESS, LAZY and LOCKS (and FOLLOW in follow mode):
 *          READDIR_WATCH, SCAN_WATCH, UNWATCH, lazy opens, the syncs'
 *          PROGRESS frames, LOCK and GETLK are reachable without the
 *          input's own HELLO
 *   bit 7  the connection is the meta one (is_meta, lane META)
 * Each input gets a fresh `struct srv` on a socketpair; one peer thread
 * writes the stream, another reads every reply until the server closes,
 * and srv_loop_run runs on a thread of its own until the stream ends, as
 * main.c runs it.
 *
 * Oracles besides the sanitizers:
 *  - every reply decodes and answers a whole request frame of the stream
 *    (same opcode and id) that no other reply answered: nothing made up,
 *    nothing answered twice; a SCAN reply's records pass qft_scan_check;
 *    a NOTIFY frame decodes, has id 0 and comes only where HELLO granted
 *    notification; a PROGRESS frame names a request of the stream;
 *  - nothing outside the served root changes (but in follow mode, where
 *    the jail as a whole may): the jail holds a canary
 *    directory beside the root that symlinks in the root point at; its
 *    attributes and its file's are compared after every input;
 *  - no descriptor outlives an input (srv_handle_destroy closes them all);
 *    LeakSanitizer checks memory the same way.
 *
 * The tree: a jail directory under /tmp holds root/ (served, rebuilt
 * before every input so that inputs replay alike) and outside/ (the
 * canary).  As root the jail is a private tmpfs (size=32m, nodev, nosuid,
 * noexec) in a mount namespace of this process, so device nodes made by
 * MKNOD cannot be opened and the disk cannot fill; otherwise it is a
 * plain directory.  Either way RLIMIT_FSIZE caps every file at 4 MiB
 * (a WRITE or FALLOCATE beyond it fails with EFBIG), and the tree is
 * emptied before each input and removed at exit; the jail of a process
 * that crashed is removed by the next one to start.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "buf.h"
#include "chan.h"
#include "fuzz.h"
#include "handle.h"
#include "log.h"
#include "loop.h"
#include "msg.h"
#include "path.h"
#include "procfs.h"
#include "protocol.h"
#include "srv.h"

#define OPT_WALK     0x01
#define OPT_HELLO    0x02
#define OPT_URING    0x04
#define OPT_LZ4      0x08
#define OPT_LZ4_AUTO 0x10
#define OPT_FOLLOW   0x20
#define OPT_NOTIFY   0x40
#define OPT_META     0x80

#define FILE_SIZE_CAP ((rlim_t)4 << 20)
#define CANARY_TEXT   "the server must never touch this\n"

static struct {
	bool ready;
	bool tmpfs;
	char jail[64];
	char root[96];
	char outside[96];
	struct stat canary_dir, canary_file;
	int nfds;            /* open descriptors between inputs; -1 = unset */
} g = { .nfds = -1 };

/*
 * Open descriptors of the kinds an input makes (files of the jail,
 * sockets, io_uring and eventfd): not all of them, because the runtime
 * opens its own as it goes (libFuzzer's symbolizer pipes, corpus files).
 * With `show`, each one and what it is, on stderr.
 */
static int count_fds(bool show)
{
	char link[PATH_MAX], path[300];
	struct dirent *de;
	int n = 0;
	DIR *d;

	d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		ssize_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		link[len > 0 ? len : 0] = '\0';
		if (strncmp(link, g.jail, strlen(g.jail)) != 0 &&
		    strncmp(link, "socket:", 7) != 0 &&
		    strncmp(link, "anon_inode:", 11) != 0)
			continue;
		n++;
		if (show)
			fprintf(stderr, "fuzz_server: fd %s -> %s\n",
				de->d_name, link);
	}
	closedir(d);
	return n;
}

static void empty_dir(int dfd);

/* Removes `name` from `dfd`, a directory with all it holds; true if gone. */
static bool remove_entry(int dfd, const char *name)
{
	struct stat st;
	int sub;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) == 0;
	/* An input may have chmod'ed it to 0. */
	fchmodat(dfd, name, 0700, 0);
	sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		     O_CLOEXEC);
	if (sub >= 0) {
		empty_dir(sub);
		close(sub);
	}
	return unlinkat(dfd, name, AT_REMOVEDIR) == 0;
}

/* Removes everything inside the directory `dfd`, whatever its modes. */
static void empty_dir(int dfd)
{
	bool again = true;

	/* Removing entries while reading the directory may skip some:
	 * passes repeat until one removes nothing. */
	while (again) {
		struct dirent *de;
		DIR *d;
		int fd;

		again = false;
		fd = dup(dfd);
		if (fd < 0)
			return;
		d = fdopendir(fd);
		if (!d) {
			close(fd);
			return;
		}
		rewinddir(d);
		while ((de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			if (remove_entry(dfd, de->d_name))
				again = true;
		}
		closedir(d);
	}
}

static void remove_xattrs(const char *path)
{
	char list[4096];
	ssize_t n;

	n = llistxattr(path, list, sizeof(list));
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
		lremovexattr(path, list + i);
}

static void put_file(int dfd, const char *name, const char *text, off_t size)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			0644);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	if (size)
		FUZZ_CHECK(ftruncate(fd, size) == 0);
	close(fd);
}

/* Rebuilds the served tree, so that every input meets the same one. */
static void populate(void)
{
	char abs[160];
	int dfd;

	/* An input may have made the root unreadable. */
	FUZZ_CHECK(chmod(g.root, 0755) == 0);
	dfd = open(g.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(dfd >= 0);
	empty_dir(dfd);
	if (geteuid() == 0)
		FUZZ_CHECK(fchown(dfd, 0, 0) == 0);
	remove_xattrs(g.root);

	put_file(dfd, "a", "hello, qftfs\n", 0);
	put_file(dfd, "big", "start", 200000);    /* sparse: READs of zeros */
	FUZZ_CHECK(mkdirat(dfd, "d", 0755) == 0);
	put_file(dfd, "d/f", "in a directory\n", 0);
	FUZZ_CHECK(mkdirat(dfd, "d/e", 0700) == 0);
	FUZZ_CHECK(linkat(dfd, "a", dfd, "d/hard", 0) == 0);
	FUZZ_CHECK(symlinkat("a", dfd, "ln") == 0);
	FUZZ_CHECK(symlinkat("d", dfd, "dl") == 0);
	FUZZ_CHECK(symlinkat("../outside/secret", dfd, "up") == 0);
	FUZZ_CHECK(symlinkat("../outside", dfd, "updir") == 0);
	snprintf(abs, sizeof(abs), "%s/secret", g.outside);
	FUZZ_CHECK(symlinkat(abs, dfd, "abs") == 0);
	FUZZ_CHECK(symlinkat(g.outside, dfd, "absdir") == 0);
	FUZZ_CHECK(symlinkat("nowhere", dfd, "dangling") == 0);
	FUZZ_CHECK(symlinkat("loop", dfd, "loop") == 0);
	FUZZ_CHECK(mkfifoat(dfd, "fifo", 0644) == 0);
	/* Not every file system has user xattrs (tmpfs before Linux 6.6). */
	(void)setxattr(g.root, "user.qftfs", "v", 1, 0);
	close(dfd);
}

static void check_canary(void)
{
	char path[160];
	struct stat d, f;

	snprintf(path, sizeof(path), "%s/secret", g.outside);
	FUZZ_CHECK(lstat(g.outside, &d) == 0);
	FUZZ_CHECK(lstat(path, &f) == 0);
	/* ctime moves on any change: content, mode, owner, links, xattrs. */
	FUZZ_CHECK(d.st_ino == g.canary_dir.st_ino &&
		   d.st_ctim.tv_sec == g.canary_dir.st_ctim.tv_sec &&
		   d.st_ctim.tv_nsec == g.canary_dir.st_ctim.tv_nsec &&
		   d.st_mtim.tv_nsec == g.canary_dir.st_mtim.tv_nsec &&
		   d.st_mode == g.canary_dir.st_mode &&
		   d.st_nlink == g.canary_dir.st_nlink);
	FUZZ_CHECK(f.st_ino == g.canary_file.st_ino &&
		   f.st_ctim.tv_sec == g.canary_file.st_ctim.tv_sec &&
		   f.st_ctim.tv_nsec == g.canary_file.st_ctim.tv_nsec &&
		   f.st_size == g.canary_file.st_size &&
		   f.st_mode == g.canary_file.st_mode &&
		   f.st_nlink == g.canary_file.st_nlink);
}

static void cleanup(void)
{
	int fd;

	if (g.tmpfs) {
		/* The mount is private to this process's namespace. */
		umount2(g.jail, MNT_DETACH);
	} else {
		fd = open(g.jail, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			empty_dir(fd);
			close(fd);
		}
	}
	rmdir(g.jail);
}

/*
 * A jail of a fuzz_server process that died without cleaning up (a crash
 * ends it with abort()): emptied and removed (fuzz_remove_stale says
 * whose).  Its tmpfs was in its own mount namespace, gone with it.
 */
static void remove_jail(const char *path)
{
	int fd;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	empty_dir(fd);
	close(fd);
	rmdir(path);
}

/* A tmpfs of its own, seen by this process only; false if not allowed. */
static bool mount_tmpfs(const char *dir)
{
	if (geteuid() != 0)
		return false;
	if (unshare(CLONE_NEWNS) < 0)
		return false;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return false;
	return mount("qftfs-fuzz", dir, "tmpfs",
		     MS_NODEV | MS_NOSUID | MS_NOEXEC,
		     "size=32m,nr_inodes=4096,mode=0700") == 0;
}

/* The served root and the canary beside it, in an empty jail. */
static void make_jail(void)
{
	char path[160];
	int fd;

	FUZZ_CHECK(mkdir(g.root, 0755) == 0);
	FUZZ_CHECK(mkdir(g.outside, 0755) == 0);
	snprintf(path, sizeof(path), "%s/secret", g.outside);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, CANARY_TEXT, strlen(CANARY_TEXT)) ==
		   (ssize_t)strlen(CANARY_TEXT));
	close(fd);
	FUZZ_CHECK(lstat(g.outside, &g.canary_dir) == 0);
	FUZZ_CHECK(lstat(path, &g.canary_file) == 0);
}

/* After an input in follow mode, which may have changed anything in the
 * jail (the jail itself included): everything anew. */
static void rebuild_jail(void)
{
	int fd;

	FUZZ_CHECK(chmod(g.jail, 0700) == 0);
	remove_xattrs(g.jail);
	fd = open(g.jail, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	empty_dir(fd);
	close(fd);
	make_jail();
}

static void setup(void)
{
	struct rlimit rl;

	/* As qftfs-server's main() does. */
	signal(SIGPIPE, SIG_IGN);
	umask(0);
	/* A write past RLIMIT_FSIZE must fail with EFBIG, not kill us. */
	signal(SIGXFSZ, SIG_IGN);
	/* QFTFS_FUZZ_DEBUG=1 logs every request, to see what an input does. */
	qft_log_init("fuzz_server", getenv("QFTFS_FUZZ_DEBUG") ?
		     QFT_LOG_DEBUG : QFT_LOG_ERR);

	/* Asked once per process, and the first asking decides: here,
	 * before a server thread in follow mode (chrooted into the jail,
	 * where /proc is not procfs) could. */
	FUZZ_CHECK(srv_procfs_ok());
	fuzz_remove_stale("qftfs-fuzz-", remove_jail);
	snprintf(g.jail, sizeof(g.jail), "/tmp/qftfs-fuzz-%ld-XXXXXX",
		 (long)getpid());
	FUZZ_CHECK(mkdtemp(g.jail) != NULL);
	g.tmpfs = mount_tmpfs(g.jail);
	if (!g.tmpfs)
		fprintf(stderr, "fuzz_server: no private tmpfs (not root?): "
			"serving %s with files capped at %llu bytes\n", g.jail,
			(unsigned long long)FILE_SIZE_CAP);
	atexit(cleanup);

	rl.rlim_cur = rl.rlim_max = FILE_SIZE_CAP;
	FUZZ_CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	/* Handles go up to QFT_MAX_HANDLES, as in the server. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}

	snprintf(g.root, sizeof(g.root), "%s/root", g.jail);
	snprintf(g.outside, sizeof(g.outside), "%s/outside", g.jail);
	make_jail();
	g.ready = true;
}

/* The client's side: one thread writes the stream, one reads replies. */
struct peer {
	int fd;
	const uint8_t *out;  /* the whole request stream */
	size_t out_len;
	/* The whole frames of the stream, as the server could have read
	 * them, and which of them a reply answered. */
	struct sent_req {
		uint16_t op;
		uint64_t id;
		bool answered;
	} *reqs;
	size_t nreqs;
	bool notify;         /* the session may send NOTIFY frames */
};

/* Lists the whole frames of the stream by their header's length alone. */
static void list_requests(struct peer *p)
{
	size_t off = 0, n = 0;

	p->reqs = calloc(p->out_len / QFT_HDR_SIZE + 1, sizeof(*p->reqs));
	FUZZ_CHECK(p->reqs != NULL);
	while (p->out_len - off >= QFT_HDR_SIZE) {
		const uint8_t *h = p->out + off;
		uint32_t len = qft_load32(h);

		if (p->out_len - off - QFT_HDR_SIZE < len)
			break;
		p->reqs[n].op = qft_load16(h + 4);
		p->reqs[n].id = qft_load64(h + 8);
		n++;
		off += QFT_HDR_SIZE + len;
	}
	p->nreqs = n;
}

static void *writer_main(void *arg)
{
	struct peer *p = arg;
	size_t sent = 0;

	while (sent < p->out_len) {
		ssize_t n = send(p->fd, p->out + sent, p->out_len - sent,
				 MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;    /* the server closed: it read all it wanted */
		sent += (size_t)n;
	}
	shutdown(p->fd, SHUT_WR);
	return NULL;
}

/*
 * Checks that reply `m` answers a whole request of the stream, one not
 * answered yet, with its opcode and id.  Replies may come in any order
 * (the I/O engine answers READ and WRITE as they complete, and a refused
 * request at once), and ids may repeat, so the earliest match counts.
 */
static void check_reply(struct peer *p, const struct qft_msg *m)
{
	size_t i;

	FUZZ_CHECK(m->flags & QFT_F_REPLY);
	for (i = 0; i < p->nreqs; i++)
		if (!p->reqs[i].answered && p->reqs[i].id == m->id &&
		    p->reqs[i].op == m->op)
			break;
	FUZZ_CHECK(i < p->nreqs);
	p->reqs[i].answered = true;
}

/* A PROGRESS frame names a whole request of the stream. */
static void check_progress(struct peer *p, const struct qft_msg *m)
{
	size_t i;

	for (i = 0; i < p->nreqs; i++)
		if (p->reqs[i].id == m->id)
			break;
	FUZZ_CHECK(m->id != 0 && i < p->nreqs);
}

/*
 * Reads replies the way the client does (a channel, which expands
 * compressed frames once HELLO agreed on them) until the server closes.
 */
static void *reader_main(void *arg)
{
	struct peer *p = arg;
	struct qft_chan c;
	struct qft_hdr h;
	struct qft_msg m;
	struct qbuf in;
	int fd, r;

	fd = dup(p->fd);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(qft_chan_init(&c, fd, -1) == 0);
	qbuf_init(&in, QFT_CHAN_RECV_LIMIT);
	while ((r = qft_chan_recv(&c, &in, &h)) == 0) {
		FUZZ_CHECK(qft_msg_decode(&m, in.data, in.len) == 0);
		if (h.flags & QFT_F_NOTIFY) {
			FUZZ_CHECK(p->notify && m.op == QFT_OP_NOTIFY &&
				   m.id == 0);
			continue;
		}
		if (h.flags & QFT_F_PROGRESS) {
			FUZZ_CHECK(m.op == QFT_OP_PROGRESS);
			check_progress(p, &m);
			continue;
		}
		check_reply(p, &m);
		/* The server's scan records are what a client accepts. */
		if (m.op == QFT_OP_SCAN && m.status == QFT_OK)
			FUZZ_CHECK(qft_scan_check(&m.data) >= 0);
		if (m.op == QFT_OP_HELLO && m.status == QFT_OK &&
		    (m.features & QFT_FEAT_LZ4))
			qft_chan_set_lz4(&c, QFT_LZ4_NONE);
	}
	/* The server's stream ends between two replies, and it ends with a
	 * reset when the server left some of ours unread. */
	FUZZ_CHECK(r == -EPIPE || r == -ECONNRESET);
	qbuf_free(&in);
	qft_chan_destroy(&c);
	return NULL;
}

static void srv_teardown(struct srv *s)
{
	/* As main.c's srv_free: the lock records hold descriptors. */
	srv_lock_destroy(&s->locks);
	srv_handle_destroy(&s->handles);
	/* s->in is a view of the I/O engine's pool, which the loop frees. */
	qbuf_free(&s->out);
	qbuf_free(&s->dirents);
	free(s->data);
	s->data = NULL;
	qft_chan_destroy(&s->chan);
}

/* The server's own thread: in follow mode its root is the jail. */
struct serve {
	struct srv *s;
	bool chroot;
};

static void *serve_main(void *arg)
{
	struct serve *sv = arg;

	if (sv->chroot) {
		/* This thread's root directory and cwd only, and those of
		 * the threads it starts (the I/O engine's workers). */
		FUZZ_CHECK(unshare(CLONE_FS) == 0);
		FUZZ_CHECK(chroot(g.jail) == 0 && chdir("/") == 0);
	}
	(void)srv_loop_run(sv->s);
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct srv s;  /* large: off the stack, as in main.c */
	struct peer peer;
	struct qbuf stream;
	struct qft_msg hello;
	struct serve sv;
	pthread_t writer, reader, server;
	bool follow;
	uint8_t opts;
	int sp[2], root_fd, nfds;

	if (size < 1)
		return 0;
	if (!g.ready)
		setup();
	opts = data[0];
	/* Following symlinks is safe here only inside the jail's tmpfs. */
	follow = (opts & OPT_FOLLOW) && g.tmpfs;
	populate();

	/* The stream the client sends: HELLO if asked, then the input. */
	qbuf_init(&stream, QFT_HDR_SIZE + 64 + size);
	if (opts & OPT_HELLO) {
		qft_msg_init(&hello, QFT_OP_HELLO, 0);
		hello.magic = QFT_MAGIC;
		hello.version = QFT_VERSION;
		if (opts & OPT_LZ4)
			hello.features = QFT_FEAT_LZ4;
		if (opts & OPT_LZ4_AUTO)
			hello.features |= QFT_FEAT_LZ4 | QFT_FEAT_LZ4_AUTO;
		if (opts & OPT_NOTIFY)
			hello.features |= QFT_FEAT_NOTIFY | QFT_FEAT_PROGRESS |
					  QFT_FEAT_LAZY | QFT_FEAT_LOCKS;
		if (follow && (opts & OPT_NOTIFY))
			hello.features |= QFT_FEAT_FOLLOW;
		FUZZ_CHECK(qft_msg_encode(&stream, &hello) == 0);
	}
	FUZZ_CHECK(qbuf_put_bytes(&stream, data + 1, size - 1) == 0);

	memset(&s, 0, sizeof(s));
	s.io_backend = (opts & OPT_URING) ? SRV_IO_AUTO : SRV_IO_POSIX;
	root_fd = open(g.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(root_fd >= 0);
	srv_path_init(&s.root, root_fd, opts & OPT_WALK);
	s.root.follow = follow;
	if (opts & OPT_META) {
		s.is_meta = true;
		s.lane = SRV_LANE_META;
	}
	if (opts & OPT_NOTIFY)
		FUZZ_CHECK(srv_watch_new(&s.watch, 64, false) == 0);
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
			      sp) == 0);
	FUZZ_CHECK(qft_chan_init(&s.chan, sp[0], sp[0]) == 0);
	srv_handle_init(&s.handles);
	qbuf_init(&s.out, QFT_HDR_SIZE + QFT_MAX_PAYLOAD);
	qbuf_init(&s.dirents, QFT_MAX_READDIR);

	memset(&peer, 0, sizeof(peer));
	peer.fd = sp[1];
	peer.out = stream.data;
	peer.out_len = stream.len;
	peer.notify = opts & OPT_NOTIFY;
	list_requests(&peer);
	FUZZ_CHECK(pthread_create(&writer, NULL, writer_main, &peer) == 0);
	FUZZ_CHECK(pthread_create(&reader, NULL, reader_main, &peer) == 0);

	sv.s = &s;
	sv.chroot = follow;
	FUZZ_CHECK(pthread_create(&server, NULL, serve_main, &sv) == 0);
	FUZZ_CHECK(pthread_join(server, NULL) == 0);
	/* As main.c ends a session: no more notifications on this
	 * connection, then the watches go before the channel does. */
	srv_watch_detach(s.watch, &s.chan);
	srv_watch_free(s.watch);
	s.watch = NULL;
	/* Closing the server's end is what ends the reader. */
	srv_teardown(&s);
	FUZZ_CHECK(pthread_join(writer, NULL) == 0);
	FUZZ_CHECK(pthread_join(reader, NULL) == 0);

	close(sp[1]);
	close(root_fd);
	free(peer.reqs);
	qbuf_free(&stream);

	if (follow)
		rebuild_jail();
	else
		check_canary();
	nfds = count_fds(false);
	if (g.nfds < 0)
		g.nfds = nfds;
	else if (nfds != g.nfds)
		count_fds(true);
	FUZZ_CHECK(nfds == g.nfds);
	return 0;
}
