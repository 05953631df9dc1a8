// SPDX-License-Identifier: MIT
/*
 * qftfs: mounts a directory served by qftfs-server.  This file is the
 * mount's lifecycle only: parse (cli/options.h), log in and connect
 * (net/local.h, net/remote.h), mount, loop, tear down.
 *
 * Order matters: everything that can fail for a reason the user must see
 * (arguments, the source, starting the server, the version handshake, the
 * mount itself) happens in the foreground before fuse_daemonize(), so a
 * background mount either works or makes qftfs exit non-zero with the
 * reason.  Threads are started only after daemonizing, which forks; the
 * one exception, the ssh channel's pump, is paused around the fork.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>

#include <fuse_lowlevel.h>

#include "cli/options.h"
#include "cli/statcmd.h"
#include "cli/sync.h"
#include "cli/usr1.h"
#include "fs/commit.h"
#include "fs/dircache.h"
#include "fs/fs.h"
#include "fs/idmap.h"
#include "fs/rebind.h"
#include "log.h"
#include "login/bootstrap.h"
#include "login/ssh.h"
#include "net/conn.h"
#include "net/local.h"
#include "net/remote.h"
#include "net/transport.h"
#include "ops/ops.h"
#include "ops/reqlog.h"

#define EXIT_USAGE        2
#define SHUTDOWN_WAIT_MS  10000
/* Worker threads, and so requests the kernel can have in flight. */
#define MAX_THREADS       32

/* libfuse takes over descriptors 0-2 when daemonizing; ours must not be
 * among them just because the caller closed them. */
static void ensure_std_fds(void)
{
	int fd;

	do {
		fd = open("/dev/null", O_RDWR);
	} while (fd >= 0 && fd <= STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

static int run_loop(struct fuse_session *se, bool single)
{
	struct fuse_loop_config *cfg;
	int r;

	if (single)
		return fuse_session_loop(se);
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_max_threads(cfg, MAX_THREADS);
	r = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return r;
}

/*
 * Ends the connection and what it runs over.  False when a reconnect
 * attempt would not stop in time and was left to the exiting process
 * (nothing it uses may be freed then).
 */
static bool stop_conn(struct qc_conn *conn, struct qc_remote_tr *rt)
{
	int r;

	/* Before qc_conn_start the tunnel's pump may still be paused for
	 * the fork, and it has to carry the end of stream. */
	if (rt && rt->first && (r = qc_boot_resume(rt->first)) < 0)
		qft_warn("cannot restart the ssh channel thread: %s",
			 strerror(-r));
	return qc_conn_shutdown(conn, SHUTDOWN_WAIT_MS, QC_REAP_WAIT_MS) !=
	       -EINPROGRESS;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_args args_kept = FUSE_ARGS_INIT(0, NULL);
	struct qc_cmdline cl = { 0 };
	struct qc_boot_source rem = { 0 };
	struct qc_local_tr lt = { 0 };
	struct qc_remote_tr rt = { 0 };
	struct qc_conn_opts co = {
		.timeout_s = QC_TIMEOUT_DEFAULT,
		.keepalive_s = QC_KEEPALIVE_DEFAULT,
		.resume_s = QC_RESUME_DEFAULT,
		.reconnect = true,
	};
	struct qc_fs fs = { 0 };
	struct qc_usr1 usr1 = { 0 };
	size_t dircache_max = QC_DIRCACHE_DEFAULT;
	struct fuse_session *se;
	char *root = NULL, *mnt = NULL;
	int ret = 1, r;
	bool remote, lost, ssh_inited = false;

	ensure_std_fds();
	/* A server that died must be an error code, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	qc_usr1_block();
	qft_log_init("qftfs", QFT_LOG_INFO);
	/* The session secret and record keys will be in this process's
	 * memory: no core file of it, and no ptrace or /proc/PID/mem by the
	 * user's other processes (docs/security.md). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		qft_warn("cannot make the process non-dumpable: %s",
			 strerror(errno));
	if (argc >= 2 && strcmp(argv[1], "--stats") == 0)
		return qc_statcmd_main(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--sync") == 0)
		return qc_sync_main(argc, argv);

	r = qc_cmdline_parse(&args, &cl);
	if (r == 0 && (cl.help || cl.version)) {
		if (cl.help)
			qc_cmdline_usage();
		else
			qc_cmdline_version();
		fflush(stdout);
		ret = 0;
		goto out_free_args;
	}
	remote = cl.source && qc_boot_is_remote(cl.source);
	if (r < 0 || qc_cmdline_settings(&cl, &fs, &dircache_max, &co) < 0 ||
	    (r = qc_cmdline_login(&cl, remote, &rem, &rt.bo, &co)) == -EINVAL) {
		ret = EXIT_USAGE;
		goto out_free_args;
	}
	if (r < 0)
		goto out_free_args;
	if (remote) {
		if (qc_ssh_global_init() < 0) {
			fprintf(stderr, "qftfs: cannot initialise libssh2\n");
			goto out_free_args;
		}
		ssh_inited = true;
	}
	if ((!remote && qc_cmdline_root(&cl, &root) < 0) ||
	    qc_cmdline_mountpoint(&cl, &mnt) < 0)
		goto out_free_args;

	if (cl.debug)
		qft_log_set_level(QFT_LOG_DEBUG);
	if (qc_cmdline_mount_opts(&cl, &args) < 0)
		goto out_free_args;
	if (qc_fs_init(&fs) < 0) {
		fprintf(stderr, "qftfs: out of memory\n");
		goto out_free_args;
	}
	if (qc_dir_init(&fs, dircache_max) < 0) {
		fprintf(stderr, "qftfs: out of memory\n");
		goto out_free_nodes;
	}
	/* The session takes the options it knows out of `args`: kept
	 * whole for a second session (qc_cmdline_shared_mount). */
	for (int i = 0; i < args.argc; i++)
		if (fuse_opt_add_arg(&args_kept, args.argv[i]) < 0) {
			fprintf(stderr, "qftfs: out of memory\n");
			goto out_free_nodes;
		}
	/* Through reqlog: statistics and the -d request log. */
	se = fuse_session_new(&args, qc_reqlog_ops(&qc_ops, &fs),
			      sizeof(qc_ops), &fs);
	if (!se) {
		/* libfuse said why; nearly always an unknown option. */
		ret = EXIT_USAGE;
		goto out_free_nodes;
	}
	qft_debug("options: timeout %d s, keepalive %d s, resume %d s, "
		  "reconnect %s, "
		  "compress %s, readahead %llu, dircache %zu, batch %s",
		  co.timeout_s, co.keepalive_s, co.resume_s, co.reconnect ? "yes" : "no",
		  cl.compress ? cl.compress : "none",
		  (unsigned long long)fs.readahead, dircache_max,
		  rt.bo.ssh.batch ? "yes" : "no");
	/* After every option is known good, before the server starts. */
	if (qc_cmdline_check_mountpoint(mnt) < 0)
		goto out_destroy_session;

	fs.se = se;
	/* Leases: the server says when a cached directory changed. */
	if (fs.dirs) {
		co.want_notify = true;
		co.notify = qc_dir_notify;
		co.notify_ctx = &fs;
	}
	/* A session whose server died goes on with a new one, every open
	 * file bound again (net/conn.h, "Carrying a session over"). */
	co.rebind = qc_rebind_all;
	co.rebind_ctx = &fs;
	if (remote) {
		co.host = rem.host;
		r = qc_remote_start(&rt, &co, &fs.conn);
	} else {
		lt.server = cl.server;
		lt.root = root;
		lt.follow = cl.follow_symlinks;
		lt.capture = !cl.foreground;
		co.host = "the local server";
		r = qc_local_start(&lt, &co, &fs.conn);
	}
	if (r < 0)
		goto out_destroy_session;
	{
		uint32_t suid, sgid;

		/* idmap=user maps the ids the server runs as. */
		qc_conn_server_ids(fs.conn, &suid, &sgid);
		qc_idmap_set_remote(&fs.idmap, suid, sgid);
		/* A shared mount of a root server: the kernel checks too
		 * (default_permissions), a mount option, so the session is
		 * made again with it before it mounts. */
		r = qc_cmdline_shared_mount(&cl, &args_kept, suid);
		if (r < 0)
			goto out_stop_server;
		fs.kernel_acls = cl.default_permissions;
		if (r > 0) {
			struct fuse_session *se2;

			se2 = fuse_session_new(&args_kept,
					       qc_reqlog_ops(&qc_ops, &fs),
					       sizeof(qc_ops), &fs);
			if (!se2)
				goto out_stop_server;
			fuse_session_destroy(se);
			se = se2;
			fs.se = se;
		}
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out_stop_server;
	if (fuse_session_mount(se, mnt) != 0)
		goto out_remove_handlers;
	/* The pump thread would not survive the fork. */
	if (rt.first)
		qc_boot_pause(rt.first);
	if (fuse_daemonize(cl.foreground) != 0)
		goto out_unmount;
	if (!cl.foreground) {
		qft_log_set_tag(mnt);
		qft_log_to_syslog(true);
	}
	/* SIGUSR1 logs the counters; every thread started from here on
	 * inherits the mask, so only the waiting thread takes it. */
	if (qc_usr1_start(&usr1) < 0)
		qft_warn("SIGUSR1 will not log statistics: cannot start its "
			 "thread");
	if (remote) {
		r = qc_boot_resume(rt.first);
		if (r < 0) {
			qft_err("cannot restart the ssh channel thread: %s",
				strerror(-r));
			goto out_unmount;
		}
	} else {
		r = qc_transport_relay_start(lt.first);
		if (r < 0)
			qft_warn("cannot relay the server's messages: %s",
				 strerror(-r));
	}
	/* Reconnects log in again without anyone to type a password. */
	rt.bo.ssh.batch = true;
	r = qc_conn_start(fs.conn);
	if (r < 0) {
		qft_err("cannot start the connection's threads: %s",
			strerror(-r));
		goto out_unmount;
	}
	r = qc_dir_start(&fs);
	if (r < 0) {
		qft_err("cannot start the directory cache's thread: %s",
			strerror(-r));
		goto out_unmount;
	}
	/* From here on the watchdog owns the transports. */
	lt.first = NULL;
	rt.first = NULL;
	r = qc_commit_start(&fs);
	if (r < 0) {
		qft_err("cannot start the closer thread: %s", strerror(-r));
		goto out_unmount;
	}

	r = run_loop(se, cl.single);
	if (cl.debug)
		qc_reqlog_summary();
	/* Its kernel notices need the session. */
	qc_dir_stop(&fs);
	/* A signal ends the loop with its number: a normal unmount. */
	lost = qc_conn_lost(fs.conn);
	ret = r < 0 || lost ? 1 : 0;
	if (r < 0)
		qft_err("session ended: %s", strerror(-r));
	if (fs.commit.on && qc_sync_drain(&fs) < 0)
		ret = 1;

out_unmount:
	qc_usr1_stop(&usr1);
	fuse_session_unmount(se);
out_remove_handlers:
	fuse_remove_signal_handlers(se);
	/* libfuse restores SIGPIPE to the default it assumed we had. */
	signal(SIGPIPE, SIG_IGN);
out_stop_server:
	if (!stop_conn(fs.conn, remote ? &rt : NULL)) {
		/*
		 * A reconnect attempt is still blocked on the network (an ssh
		 * login to a host that is gone), using what would be freed
		 * below: leave at once, the mount being gone already.
		 */
		fuse_session_destroy(se);
		fflush(stdout);
		fflush(stderr);
		_exit(ret);
	}
	/* Releases left to it while the link was down fail at once now,
	 * and it uses the connection. */
	qc_commit_stop(&fs);
	qc_conn_free(fs.conn);
out_destroy_session:
	fuse_session_destroy(se);
out_free_nodes:
	qc_fs_destroy(&fs);
out_free_args:
	qft_log_set_tag(NULL);
	free(mnt);
	free(root);
	qc_cmdline_free(&cl);
	qc_idmap_free(&fs.idmap);
	qc_boot_source_free(&rem);
	if (ssh_inited)
		qc_ssh_global_exit();
	fuse_opt_free_args(&args_kept);
	fuse_opt_free_args(&args);
	return ret;
}
