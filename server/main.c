// SPDX-License-Identifier: MIT
/*
 * qftfs-server: serves one directory tree over the qftfs protocol.
 *
 * With --stdio the protocol runs on stdin/stdout, which is how the qftfs
 * client's local mode spawns it on a socketpair (and how tests drive it).
 * With --session it is the remote end of an ssh mount: the client starts
 * it over ssh, and session.c sets up the authenticated data plane (a TCP
 * connection, or stdin/stdout as the tunnel) before the same request loop
 * runs on it.  Logs go to stderr; stdout belongs to the protocol alone.
 *
 * A client may use two connections, bulk and meta (docs/protocol.md,
 * "Connections"), so that metadata never queues behind file data.  Each
 * is served by a thread of its own with its own struct srv (handles,
 * buffers, I/O engine); they share only the root and the options.  With
 * --stdio the meta connection is the descriptor --meta-fd names; with
 * --session, session.c accepts it as a second authenticated connection.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "attach.h"
#include "host.h"
#include "cred.h"
#include "io.h"
#include "xfer.h"
#include "log.h"
#include "loop.h"
#include "session.h"
#include "tcpcc.h"
#include "srv.h"
#include "thread.h"
#include "uring.h"
#include "watch.h"

#define EXIT_USAGE 2
/* Test knob: "off" makes --meta-fd close the descriptor unserved, as a
 * server without meta support would look to the client. */
#define META_ENV "QFTFS_SERVER_META"

/*
 * The file I/O backend when neither --io nor QFTFS_SERVER_IO chooses one.
 * Measured through a mount and with the server alone (512 MiB onto and
 * off it, page cache warm and cold, ext4): pread/pwrite moved as much or
 * more data for 10-20% less server CPU and half the memory, because
 * ext4's buffered writes go to io_uring's worker threads (a wakeup and a
 * context switch per 1 MiB WRITE) and its reads from the page cache
 * complete inline, like pread.  --io=auto or uring choose io_uring.
 */
#define DEFAULT_IO SRV_IO_POSIX

enum {
	OPT_STDIO = 256,
	OPT_ROOT,
	OPT_SESSION,
	OPT_IO,
	OPT_NO_COMPRESS,
	OPT_META_FD,
	OPT_MAX_WATCHES,
	OPT_FOLLOW_SYMLINKS,
	OPT_DIRECT,
	OPT_RESUME,
	OPT_ATTACH,
	OPT_ALLOW_DEVICES,
	OPT_CONGESTION,
};

/* The grace when --resume is not given: the client's remote command sets
 * it, so that a server predating the option just ignores it. */
#define RESUME_ENV "QFTFS_RESUME"
/* Likewise --congestion, from the client's -o congestion=. */
#define CONGESTION_ENV "QFTFS_CONGESTION"


static void usage(FILE *f)
{
	fprintf(f,
		"Usage: qftfs-server --stdio|--session --root DIR [--io=MODE]\n"
		"                    [--direct=MODE] [--meta-fd N] [--max-watches N]\n"
		"                    [--follow-symlinks] [--resume=SECS]\n"
		"                    [--allow-devices] [--congestion=CC] [-d]\n"
		"       qftfs-server --attach ID\n"
		"Serve the directory DIR over the qftfs protocol.\n"
		"\n"
		"  --stdio       speak the protocol on stdin/stdout\n"
		"  --session     the remote end of an ssh mount: read the session\n"
		"                secret on stdin, listen on the ssh address, and\n"
		"                serve the client that proves it knows the secret\n"
		"  --root DIR    the directory to serve; nothing outside it is\n"
		"                ever reached (but see --follow-symlinks)\n"
		"  --follow-symlinks  follow symlinks as the server's user's own\n"
		"                programs do (qftfs -o follow_symlinks): the\n"
		"                client sees what each one leads to, wherever\n"
		"                that is on this host, \"/\" meaning this host's\n"
		"                root; paths are then confined by the user's\n"
		"                permissions only\n"
		"  --allow-devices  let clients make block and character device\n"
		"                nodes (mknod); without it they get EPERM.  A\n"
		"                device node is never opened for data either way\n"
		"  --io=MODE     file I/O: posix (pread/pwrite; the default),\n"
		"                uring (io_uring; fail if it is refused) or\n"
		"                auto (io_uring where the kernel allows it,\n"
		"                else pread/pwrite)\n"
		"  --direct=MODE large aligned reads and writes of regular\n"
		"                files bypass the page cache (O_DIRECT): auto\n"
		"                (the default: where the file system allows it;\n"
		"                reads only of data not cached) or off\n"
		"  --no-compress refuse the client's lz4 compression\n"
		"                (qftfs -o compress=): frames travel as they are\n"
		"  --meta-fd N   with --stdio: descriptor N is a second stream\n"
		"                socket, the client's meta connection (metadata\n"
		"                requests), served by a thread of its own\n"
		"  --max-watches N  directories watched for the client's\n"
		"                change notification at most (default %u);\n"
		"                past it the least recently listed is dropped\n"
		"  --resume=SECS with --session over TCP: a client that asks may\n"
		"                resume the session for SECS seconds after its\n"
		"                connections or its ssh channel end (qftfs -o\n"
		"                resume=); at most %u; 0, the default, ends the\n"
		"                session with its connection.  Without the\n"
		"                option, the environment variable " RESUME_ENV "\n"
		"  --congestion=CC  the TCP congestion control of what this\n"
		"                server sends over a session's connections\n"
		"                (downloads): auto (the default: bbr where this\n"
		"                user may choose it, else the host's default),\n"
		"                system (the host's default) or an algorithm's\n"
		"                name.  Without the option, the environment\n"
		"                variable " CONGESTION_ENV " (qftfs -o congestion=)\n"
		"  --attach ID   connect this ssh channel to the running session\n"
		"                ID of this user (qftfs resumes a session over\n"
		"                ssh with it); exits %d when there is none\n"
		"  -d, --debug   log every request to stderr\n"
		"  -V, --version print the version and exit\n"
		"  -h, --help    print this help and exit\n"
		"\n"
		"The server is normally started by qftfs(1), not by hand.\n",
		SRV_WATCH_MAX_DEFAULT, QFT_RESUME_MAX_S,
		QFT_ATTACH_EXIT_GONE);
}

/* Handles are client-chosen up to QFT_MAX_HANDLES; let them all fit. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		qft_debug("cannot raise the open file limit: %s",
			  strerror(errno));
}

/*
 * Moves the protocol off descriptors 0 and 1 and points those at
 * /dev/null and stderr, so that a stray printf (ours or a library's)
 * lands in the log instead of corrupting the stream.
 */
static int take_stdio(int *rfd, int *wfd)
{
	int nul;

	*rfd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	if (*rfd < 0)
		return -errno;
	*wfd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	if (*wfd < 0) {
		int r = -errno;

		close(*rfd);
		return r;
	}
	nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nul >= 0) {
		dup2(nul, STDIN_FILENO);
		close(nul);
	}
	dup2(STDERR_FILENO, STDOUT_FILENO);
	return 0;
}

/* Parses --max-watches: 1..SRV_WATCH_MAX_LIMIT. */
static int parse_max_watches(const char *arg, unsigned *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (end == arg || *end || errno || v < 1 ||
	    v > (long)SRV_WATCH_MAX_LIMIT) {
		qft_err("--max-watches=%s: expected 1 to %u", arg,
			SRV_WATCH_MAX_LIMIT);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* --resume=SECS, else QFTFS_RESUME: 0 .. QFT_RESUME_MAX_S (capped). */
static int parse_resume(const char *opt, unsigned *out)
{
	const char *arg = opt ? opt : getenv(RESUME_ENV);
	char *end;
	long v;

	*out = 0;
	if (!arg || !*arg)
		return 0;
	errno = 0;
	v = strtol(arg, &end, 10);
	if (end == arg || *end || errno || v < 0) {
		if (!opt) {
			/* A remote command's environment is no usage error. */
			qft_warn("ignoring %s=%s: expected seconds", RESUME_ENV,
				 arg);
			return 0;
		}
		qft_err("--resume=%s: expected seconds (0 to %u)", arg,
			QFT_RESUME_MAX_S);
		return -EINVAL;
	}
	if (v > (long)QFT_RESUME_MAX_S) {
		qft_info("resume grace %ld s capped at %u s", v,
			 QFT_RESUME_MAX_S);
		v = QFT_RESUME_MAX_S;
	}
	*out = (unsigned)v;
	return 0;
}

/* --io, else QFTFS_SERVER_IO (kept for test suites), else the default. */
/*
 * --congestion=CC, else QFTFS_CONGESTION, else auto.  A bad option is a
 * usage error; a bad variable (the client's, maybe newer) is warned
 * about and auto is used.
 */
static int parse_congestion(const char *opt, struct qft_tcpcc *out)
{
	const char *env = getenv(CONGESTION_ENV);

	qft_tcpcc_parse(NULL, out);
	if (opt) {
		if (qft_tcpcc_parse(opt, out) == 0)
			return 0;
		qft_err("--congestion=%s: expected auto, system or an "
			"algorithm's name (net.ipv4.tcp_available_congestion_"
			"control)", opt);
		return -EINVAL;
	}
	if (env && qft_tcpcc_parse(env, out) < 0)
		qft_warn("ignoring %s=%s: expected auto, system or an "
			 "algorithm's name", CONGESTION_ENV, env);
	return 0;
}

static int choose_io(const char *opt, enum srv_io_backend *b)
{
	const char *env = getenv(SRV_URING_ENV);

	if (opt) {
		if (srv_uring_backend_parse(opt, b) == 0)
			return 0;
		qft_err("--io=%s: expected auto, uring or posix", opt);
		return -EINVAL;
	}
	*b = DEFAULT_IO;
	if (env && *env && srv_uring_backend_parse(env, b) < 0) {
		qft_warn("%s=%s: expected auto, uring or posix; using %s",
			 SRV_URING_ENV, env, srv_uring_backend_name(DEFAULT_IO));
		*b = DEFAULT_IO;
	}
	return 0;
}

static void srv_free(struct srv *s)
{
	/* Files the connection left open for writing: once closed, changes
	 * to them are no longer the client's own (watch.h). */
	for (size_t n = 1; n < s->handles.cap; n++) {
		struct srv_handle *h;
		uint32_t writer;

		if (srv_handle_get(&s->handles, n, SRV_H_FILE, &h) < 0 ||
		    !h->watch_writer)
			continue;
		writer = h->watch_writer;
		(void)srv_handle_close(&s->handles, n);
		srv_watch_writer_close(s->watch, writer);
	}
	/* The client's locks end with its session (lock.h). */
	srv_lock_destroy(&s->locks);
	srv_handle_destroy(&s->handles);
	srv_replay_free(s->replay);
	s->replay = NULL;
	/* s->in was a view of the I/O engine's pool, gone with it. */
	qbuf_free(&s->out);
	qbuf_free(&s->dirents);
	free(s->data);
}

/* The meta connection's server and the thread serving it. */
struct meta {
	struct srv s;
	pthread_t thread;
	bool running;        /* main thread only */
	/* --session: the thread accepts the connection first. */
	struct srv_session *ss;
	struct qft_seal tx, rx;
	/* Written by the thread, read after joining it. */
	bool chan_ok;        /* s.chan is set up */
	int result;          /* srv_loop_run's, once the thread ended */
};

/* --session: the meta connection from the listener.  Not coming is no
 * failure: the client may use one connection. */
static int meta_accept(struct meta *m)
{
	int fd, r;

	r = srv_session_accept_meta(m->ss, &fd, &m->tx, &m->rx);
	if (r < 0)
		return r;
	r = qft_chan_init(&m->s.chan, fd, fd);
	if (r < 0) {
		qft_err("cannot set up the meta connection: %s", strerror(-r));
		srv_session_forget_meta(m->ss);
		close(fd);
		qft_seal_free(&m->tx);
		qft_seal_free(&m->rx);
		return r;
	}
	qft_chan_set_seal(&m->s.chan, &m->tx, &m->rx);
	m->chan_ok = true;
	return 0;
}

static void *meta_main(void *arg)
{
	struct meta *m = arg;

	/* Names the thread for ps and the tests (tests/test_hol.py). */
	pthread_setname_np(pthread_self(), "qftfs-meta");
	if (m->ss && meta_accept(m) < 0)
		return NULL;
	m->result = srv_loop_run(&m->s);
	qft_debug("meta connection ended");
	return NULL;
}

/* Parses --meta-fd: a descriptor that is an open stream socket. */
static int parse_meta_fd(const char *arg, int *out)
{
	int type = 0;
	socklen_t len = sizeof(type);
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (end == arg || *end || errno || v <= STDERR_FILENO || v > 65535) {
		qft_err("--meta-fd=%s: expected a descriptor number above 2",
			arg);
		return -EINVAL;
	}
	if (getsockopt((int)v, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_STREAM) {
		qft_err("--meta-fd=%ld: not a stream socket", v);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

/*
 * Starts serving the meta connection with the options and root of
 * `main`: on `fd` (taken), or with `ss`, on the connection the session
 * accepts.  On failure the descriptor is closed, which the client reads
 * as "one connection only".
 */
static int meta_start(struct meta *m, const struct srv *main, int fd,
		      struct srv_session *ss)
{
	int r;

	m->ss = ss;
	if (!ss && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (!ss) {
		r = qft_chan_init(&m->s.chan, fd, fd);
		if (r < 0) {
			close(fd);
			return r;
		}
		m->chan_ok = true;
	}
	m->s.root = main->root;
	m->s.no_compress = main->no_compress;
	m->s.allow_devices = main->allow_devices;
	m->s.watch = main->watch;
	m->s.is_meta = true;
	m->s.io_backend = main->io_backend;
	m->s.resume = main->resume;
	m->s.lane = SRV_LANE_META;
	srv_handle_init(&m->s.handles);
	qbuf_init(&m->s.out, QFT_HDR_SIZE + QFT_MAX_PAYLOAD);
	qbuf_init(&m->s.dirents, QFT_MAX_READDIR);
	r = qft_thread_start(&m->thread, meta_main, m);
	if (r < 0) {
		srv_free(&m->s);
		if (m->chan_ok)
			qft_chan_destroy(&m->s.chan);
		m->chan_ok = false;
		return r;
	}
	m->running = true;
	return 0;
}

/*
 * Waits for the meta connection to end.  After the bulk connection
 * failed, it is cut (the client gives up both when one fails); after a
 * clean end the client is closing both and the meta thread sees that.
 */
static int meta_stop(struct meta *m, bool cut)
{
	if (!m->running)
		return 0;
	if (m->ss && cut)
		srv_session_cut_meta(m->ss);
	else if (m->ss)
		/* A client of one connection is not waited for. */
		srv_session_stop_accept(m->ss);
	else if (cut)
		qft_chan_shutdown(&m->s.chan);
	pthread_join(m->thread, NULL);
	m->running = false;
	srv_free(&m->s);
	if (m->ss)
		srv_session_forget_meta(m->ss);
	if (m->chan_ok) {
		/* The notification sender may still hold it. */
		srv_watch_detach(m->s.watch, &m->s.chan);
		qft_chan_destroy(&m->s.chan);
		if (m->ss) {
			qft_seal_free(&m->tx);
			qft_seal_free(&m->rx);
		}
	}
	return m->result;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "stdio",   no_argument,       NULL, OPT_STDIO },
		{ "root",    required_argument, NULL, OPT_ROOT },
		{ "session", no_argument,       NULL, OPT_SESSION },
		{ "io",      required_argument, NULL, OPT_IO },
		{ "no-compress", no_argument,   NULL, OPT_NO_COMPRESS },
		{ "meta-fd", required_argument, NULL, OPT_META_FD },
		{ "max-watches", required_argument, NULL, OPT_MAX_WATCHES },
		{ "follow-symlinks", no_argument, NULL, OPT_FOLLOW_SYMLINKS },
		{ "direct",  required_argument, NULL, OPT_DIRECT },
		{ "resume",  required_argument, NULL, OPT_RESUME },
		{ "attach",  required_argument, NULL, OPT_ATTACH },
		{ "allow-devices", no_argument, NULL, OPT_ALLOW_DEVICES },
		{ "congestion", required_argument, NULL, OPT_CONGESTION },
		{ "debug",   no_argument,       NULL, 'd' },
		{ "version", no_argument,       NULL, 'V' },
		{ "help",    no_argument,       NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *root = NULL, *resolve, *io = NULL, *direct = NULL;
	enum srv_direct direct_mode = SRV_DIRECT_AUTO;
	bool use_stdio = false, debug = false, session = false;
	bool follow = false;
	static struct srv s;  /* large (READLINK buffer): keep it off the stack */
	static struct srv_session ss;
	static struct meta meta;
	static struct srv_resume rs;
	const char *resume_arg = NULL, *attach_id = NULL;
	const char *congestion_arg = NULL;
	struct qft_tcpcc tcpcc;
	unsigned grace = 0;
	bool relayed = false;
	const char *meta_arg = NULL, *meta_env, *watch_env, *cred_env;
	const char *max_watches_arg = NULL;
	unsigned max_watches = SRV_WATCH_MAX_DEFAULT;
	int c, root_fd, rfd = -1, wfd = -1, meta_fd = -1, r, mr;

	while ((c = getopt_long(argc, argv, "dVh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_STDIO:
			use_stdio = true;
			break;
		case OPT_ROOT:
			root = optarg;
			break;
		case OPT_SESSION:
			session = true;
			break;
		case OPT_NO_COMPRESS:
			s.no_compress = true;
			break;
		case OPT_IO:
			io = optarg;
			break;
		case OPT_META_FD:
			meta_arg = optarg;
			break;
		case OPT_MAX_WATCHES:
			max_watches_arg = optarg;
			break;
		case OPT_FOLLOW_SYMLINKS:
			follow = true;
			break;
		case OPT_DIRECT:
			direct = optarg;
			break;
		case OPT_RESUME:
			resume_arg = optarg;
			break;
		case OPT_ATTACH:
			attach_id = optarg;
			break;
		case OPT_ALLOW_DEVICES:
			s.allow_devices = true;
			break;
		case OPT_CONGESTION:
			congestion_arg = optarg;
			break;
		case 'd':
			debug = true;
			break;
		case 'V':
			printf("qftfs-server %s (protocol v%u)\n",
			       QFT_VERSION_STRING, QFT_VERSION);
			printf("default io: %s\n",
			       srv_uring_backend_name(DEFAULT_IO));
#ifdef QFT_FAULT_INJECTION
			printf("fault-injection: built in (test build; %s=%s)\n",
			       SRV_IO_FAULT_ENV, SRV_IO_FAULT_HELP);
#endif
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr,
				"Try 'qftfs-server --help' for more information.\n");
			return EXIT_USAGE;
		}
	}

	qft_log_init("qftfs-server", debug ? QFT_LOG_DEBUG : QFT_LOG_INFO);
	if (optind < argc) {
		qft_err("unexpected argument '%s'; see --help", argv[optind]);
		return EXIT_USAGE;
	}
	if (attach_id) {
		/* Nothing else: the session it attaches to has its options. */
		if (session || use_stdio || root) {
			qft_err("--attach goes alone (the session has its root "
				"and options)");
			return EXIT_USAGE;
		}
		return srv_attach_main(attach_id);
	}
	if (session && use_stdio) {
		qft_err("--stdio and --session exclude each other");
		return EXIT_USAGE;
	}
	if (!use_stdio && !session) {
		qft_err("no transport given: use --stdio (or --session, which "
			"qftfs starts over ssh)");
		return EXIT_USAGE;
	}
	if (!root) {
		qft_err("--root DIR is required");
		return EXIT_USAGE;
	}
	if (meta_arg && !use_stdio) {
		qft_err("--meta-fd goes with --stdio (a session accepts its "
			"meta connection over TCP)");
		return EXIT_USAGE;
	}
	if (meta_arg && parse_meta_fd(meta_arg, &meta_fd) < 0)
		return EXIT_USAGE;
	meta_env = getenv(META_ENV);
	if (meta_fd >= 0 && meta_env && strcmp(meta_env, "off") == 0) {
		qft_debug("%s=off: serving one connection", META_ENV);
		close(meta_fd);
		meta_fd = -1;
	}
	if (choose_io(io, &s.io_backend) < 0)
		return EXIT_USAGE;
	if (direct && srv_xfer_direct_parse(direct, &direct_mode) < 0) {
		qft_err("--direct=%s: expected auto or off", direct);
		return EXIT_USAGE;
	}
	srv_xfer_direct(direct_mode);
	if (parse_resume(resume_arg, &grace) < 0)
		return EXIT_USAGE;
	if (parse_congestion(congestion_arg, &tcpcc) < 0)
		return EXIT_USAGE;
	if (resume_arg && grace && !session)
		qft_warn("--resume goes with --session: ignored");
	if (!session)
		grace = 0;
	if (max_watches_arg &&
	    parse_max_watches(max_watches_arg, &max_watches) < 0)
		return EXIT_USAGE;
	/* The session's change notification; inotify starts when a HELLO
	 * asks for it.  Without memory for it, nobody is offered it. */
	watch_env = getenv(SRV_WATCH_ENV);
	if (srv_watch_new(&s.watch, max_watches,
			  watch_env && strcmp(watch_env, "off") == 0) < 0)
		s.watch = NULL;
	/* Before any thread: whether connections may act as their callers
	 * (cred.h), tried once on this one. */
	cred_env = getenv(SRV_CRED_ENV);
	srv_cred_setup(cred_env && strcmp(cred_env, "off") == 0);
#ifdef QFT_FAULT_INJECTION
	if (srv_io_fault_init() < 0 || srv_replay_fault_init() < 0)
		return EXIT_USAGE;
#endif
	if (srv_host_init() < 0)
		return EXIT_USAGE;

	/* Modes from the client were already masked by its kernel; a second
	 * mask here would silently drop bits the user asked for. */
	umask(0);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		qft_err("cannot open root directory %s: %s", root,
			strerror(errno));
		return 1;
	}
	resolve = getenv("QFTFS_SERVER_RESOLVE");
	if (resolve && strcmp(resolve, "walk") != 0 &&
	    strcmp(resolve, "auto") != 0)
		qft_warn("ignoring QFTFS_SERVER_RESOLVE=%s (want walk or auto)",
			 resolve);
	srv_path_init(&s.root, root_fd,
		      resolve && strcmp(resolve, "walk") == 0);
	/* Copied into the meta connection's root with the rest. */
	s.root.follow = follow;
	if (follow)
		qft_debug("path resolution: following symlinks "
			  "(--follow-symlinks)");

	if ((r = take_stdio(&rfd, &wfd)) < 0) {
		qft_err("stdin/stdout are not usable: %s", strerror(-r));
		close(root_fd);
		return 1;
	}
	if (session) {
		/* The secret is read only once the root is known to open, so
		 * that a bad directory is reported before anything else. */
		srv_resume_init(&rs, grace, &ss);
		r = srv_session_open(&ss, rfd, wfd, &rs, &srv_resume_hooks,
				     &tcpcc);
		if (r < 0) {
			close(rfd);
			close(wfd);
			close(root_fd);
			return r == -EINVAL ? EXIT_USAGE : 1;
		}
		s.resume = ss.resume;
		s.lane = SRV_LANE_BULK;
		/* A tunnel that may be resumed runs through a relay. */
		relayed = ss.tunnel && ss.data_fd >= 0;
		if (!ss.tunnel || relayed)
			r = qft_chan_init(&s.chan, ss.data_fd, ss.data_fd);
		else
			r = qft_chan_init(&s.chan, rfd, wfd);
	} else {
		r = qft_chan_init(&s.chan, rfd, wfd);
	}
	if (r < 0) {
		qft_err("cannot set up the channel: %s", strerror(-r));
		close(rfd);
		close(wfd);
		close(root_fd);
		return 1;
	}
	if (session && srv_session_attach(&ss, &s.chan) < 0) {
		qft_chan_destroy(&s.chan);
		close(root_fd);
		return 1;
	}
	srv_handle_init(&s.handles);
	qbuf_init(&s.out, QFT_HDR_SIZE + QFT_MAX_PAYLOAD);
	qbuf_init(&s.dirents, QFT_MAX_READDIR);
	qft_debug("serving %s (protocol v%u)", root, QFT_VERSION);
	if (meta_fd >= 0 || (session && !ss.tunnel)) {
		r = meta_start(&meta, &s, meta_fd, session ? &ss : NULL);
		if (r < 0)
			qft_warn("cannot serve the meta connection: %s; "
				 "serving one", strerror(-r));
		else
			qft_debug("serving the meta connection too");
	}

	r = srv_loop_run(&s);
	/* Bulk is done: notifications go on meta alone, if at all. */
	srv_watch_detach(s.watch, &s.chan);
	/* A resumable session ends with bulk (BYE, the grace passed): meta
	 * stops waiting, no more connections are accepted. */
	srv_resume_end(s.resume);
	mr = meta_stop(&meta, r < 0 || s.replay);
	if (r == 0)
		r = mr;
	/* Before the channels go: its sender may be sending on bulk. */
	srv_watch_free(s.watch);
	s.watch = NULL;
	/* Over TCP the client's end is the ssh channel's, whatever state the
	 * data connection was cut in. */
	if (session && r < 0 && srv_session_channel_closed(&ss))
		r = 0;

	srv_free(&s);
	if (session) {
		srv_session_free(&ss);
		if (!ss.tunnel || relayed) {
			/* The channel owns the data socket, not these. */
			close(rfd);
			close(wfd);
		}
	}
	qft_chan_destroy(&s.chan);
	if (session)
		/* The seals of resumed connections, once no channel uses them. */
		srv_resume_free(&rs);
	close(root_fd);
	return r == 0 ? 0 : 1;
}
