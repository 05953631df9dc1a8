// SPDX-License-Identifier: MIT
/*
 * sshfs and ssh options mapped onto qftfs ones (see compat.h).  One table
 * says what each option becomes; the man page's compatibility table is
 * written from it, and tests/test_compat.py checks every option of the
 * real `sshfs -h` against the binary.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/compat.h"

/* Reasons shared by many options, so each note stays one line. */
#define WHY_SSH_CRYPTO "the login uses libssh2's defaults and file data " \
	"travels on qftfs's own encrypted data plane (-o cipher=)"
#define WHY_SSH_PROG   "it configures the ssh program, which qftfs does " \
	"not run: qftfs logs in itself (agent, keys, ~/.ssh/config)"
#define WHY_SSH_AUTH   "qftfs tries ssh-agent, then keys, then a " \
	"password from the terminal (or -o password_stdin)"
#define WHY_DCACHE     "qftfs's directory cache holds leases: the server " \
	"says when a directory changes, so it needs no timeouts"
#define WHY_PAGECACHE  "qftfs keeps file data in the kernel's page cache " \
	"and drops it when the file changed (attr_timeout)"
#define WHY_INODES     "the kernel decides how long inodes live; qftfs " \
	"keeps them that long"

enum kind {
	K_MAP,     /* rewritten by `map` */
	K_FIXED,   /* rewritten into `to` */
	K_NOTE,    /* accepted, `why` said once */
	K_MOUNT,   /* an fstab word, addressed to mount(8) or systemd */
	K_REFUSE,  /* `why` it cannot work: exit 2 */
};

struct entry {
	const char *name;   /* without "=value" */
	enum kind kind;
	const char *to;     /* K_FIXED */
	const char *why;    /* K_NOTE, K_REFUSE */
	int (*map)(struct qc_compat *c, const char *name, const char *val);
	bool ssh;           /* an ssh_config keyword: matched ignoring case */
};

/* "key=value", or "key" alone when `v` is NULL. */
static int add_native(struct qc_compat *c, const char *key, const char *v)
{
	char *s;
	int n;

	if (c->n_native == QC_COMPAT_MAX_NATIVE) {
		fprintf(stderr, "qftfs: too many options\n");
		return -EINVAL;
	}
	n = v ? asprintf(&s, "%s=%s", key, v) : asprintf(&s, "%s", key);
	if (n < 0)
		return -ENOMEM;
	c->native[c->n_native++] = s;
	return 0;
}

static int add_note(struct qc_compat *c, const char *name, const char *why)
{
	char *s;

	/* Once per option, however often it is given. */
	for (size_t i = 0; i < c->n_notes; i++) {
		size_t n = strlen(name);

		if (strncmp(c->notes[i], name, n) == 0 &&
		    c->notes[i][n] == ':')
			return 0;
	}
	if (c->n_notes == QC_COMPAT_MAX_NOTES)
		return 0;
	if (asprintf(&s, "%s: ignored: %s", name, why) < 0)
		return -ENOMEM;
	c->notes[c->n_notes++] = s;
	return 0;
}

static int need_value(const char *name, const char *val)
{
	if (val && *val)
		return 0;
	fprintf(stderr, "qftfs: option %s needs a value (%s=...)\n", name,
		name);
	return -EINVAL;
}

/* "yes"/"no" as ssh and sshfs spell them: 1, 0, or -EINVAL said. */
static int yes_no(const char *name, const char *val)
{
	if (val && (!strcasecmp(val, "yes") || !strcasecmp(val, "true") ||
		    !strcmp(val, "1")))
		return 1;
	if (val && (!strcasecmp(val, "no") || !strcasecmp(val, "false") ||
		    !strcmp(val, "0")))
		return 0;
	fprintf(stderr, "qftfs: invalid %s '%s': expected yes or no\n", name,
		val ? val : "");
	return -EINVAL;
}

static int parse_count(const char *name, const char *val, long *out)
{
	char *end;
	long v;

	if (need_value(name, val) < 0)
		return -EINVAL;
	errno = 0;
	v = strtol(val, &end, 10);
	if (end == val || *end || errno || v < 0 || v > 1000000) {
		fprintf(stderr, "qftfs: invalid %s '%s': expected a whole "
			"number >= 0\n", name, val);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int map_compression(struct qc_compat *c, const char *name,
			   const char *val)
{
	/* -C and a bare "compression" mean yes. */
	int y = val ? yes_no(name, val) : 1;

	if (y < 0)
		return y;
	return add_native(c, "compress", y ? "auto" : "none");
}

static int map_dir_cache(struct qc_compat *c, const char *name,
			 const char *val)
{
	int y = yes_no(name, val);

	if (y < 0)
		return y;
	/* yes is the default, with the default size. */
	return y ? 0 : add_native(c, "dircache", "0");
}

static int map_dcache_size(struct qc_compat *c, const char *name,
			   const char *val)
{
	long n;

	if (parse_count(name, val, &n) < 0)
		return -EINVAL;
	/* Both count cached entries. */
	return add_native(c, "dircache", val);
}

static int map_alive_interval(struct qc_compat *c, const char *name,
			      const char *val)
{
	return parse_count(name, val, &c->alive_interval);
}

static int map_alive_count(struct qc_compat *c, const char *name,
			   const char *val)
{
	if (parse_count(name, val, &c->alive_count) < 0)
		return -EINVAL;
	if (c->alive_count == 0) {
		fprintf(stderr, "qftfs: invalid %s '0': expected at least 1\n",
			name);
		return -EINVAL;
	}
	return 0;
}

static int map_ssh_protocol(struct qc_compat *c, const char *name,
			    const char *val)
{
	if (val && strcmp(val, "2") == 0)
		return add_note(c, name, "ssh protocol 2 is the only one");
	fprintf(stderr, "qftfs: %s=%s: only ssh protocol 2 exists today; "
		"remove the option\n", name, val ? val : "");
	return -EINVAL;
}

static int map_charset(struct qc_compat *c, const char *name,
		       const char *val)
{
	if (val && (!strcasecmp(val, "UTF-8") || !strcasecmp(val, "UTF8")))
		return add_note(c, name, "file names are UTF-8 on both sides "
				"already");
	fprintf(stderr, "qftfs: %s=%s: qftfs does not convert the encoding "
		"of file names; only UTF-8 works\n", name, val ? val : "");
	return -EINVAL;
}

static int map_modules(struct qc_compat *c, const char *name,
		       const char *val)
{
	char *list, *save = NULL;
	int r = 0;

	if (need_value(name, val) < 0)
		return -EINVAL;
	list = strdup(val);
	if (!list)
		return -ENOMEM;
	for (char *m = strtok_r(list, ":", &save); m && r == 0;
	     m = strtok_r(NULL, ":", &save)) {
		if (strcmp(m, "subdir") != 0 && strcmp(m, "iconv") != 0) {
			fprintf(stderr, "qftfs: modules=%s: unknown module "
				"'%s' (subdir and iconv are understood)\n",
				val, m);
			r = -EINVAL;
		}
	}
	free(list);
	if (r == 0)
		r = add_note(c, name, "subdir= and from_code=/to_code= are "
			     "understood without loading a module");
	return r;
}

static int map_subdir(struct qc_compat *c, const char *name, const char *val)
{
	if (need_value(name, val) < 0)
		return -EINVAL;
	return add_native(c, "subdir", val);
}

static int map_user(struct qc_compat *c, const char *name, const char *val)
{
	if (need_value(name, val) < 0)
		return -EINVAL;
	return add_native(c, "User", val);
}

static int map_batch(struct qc_compat *c, const char *name, const char *val)
{
	int y = yes_no(name, val);

	if (y < 0)
		return y;
	return add_native(c, "BatchMode", y ? "yes" : "no");
}

/* ssh's spelling of an option qftfs has under the same name. */
static int map_same(struct qc_compat *c, const char *name, const char *val)
{
	static const char *const canon[] = {
		"IdentityFile", "UserKnownHostsFile", "StrictHostKeyChecking",
	};

	if (need_value(name, val) < 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(canon) / sizeof(canon[0]); i++)
		if (!strcasecmp(name, canon[i]))
			return add_native(c, canon[i], val);
	return -EINVAL;   /* not in the table above: a bug */
}

/* Options only the OpenSSH client understands: they make qftfs log in
 * with it (ssh.h) and go on its command line as they are. */
static int map_openssh(struct qc_compat *c, const char *name,
		       const char *val)
{
	char *kv;
	int r;

	if (need_value(name, val) < 0)
		return -EINVAL;
	if (asprintf(&kv, "%s=%s", name, val) < 0)
		return -ENOMEM;
	r = add_native(c, "ssh_option", kv);
	free(kv);
	return r;
}

static int map_identities_only(struct qc_compat *c, const char *name,
			       const char *val)
{
	int y = yes_no(name, val);

	if (y < 0)
		return y;
	return add_native(c, "IdentitiesOnly", y ? "yes" : "no");
}

static int map_port(struct qc_compat *c, const char *name, const char *val)
{
	if (need_value(name, val) < 0)
		return -EINVAL;
	return add_native(c, "port", val);
}

static const struct entry table[] = {
	/* sshfs's own options */
	{ "reconnect", K_FIXED, "reconnect=yes", NULL, NULL, false },
	{ "delay_connect", K_NOTE, NULL, "qftfs connects before mounting so "
	  "that a failed login is an error you see, and reconnects by itself "
	  "afterwards", NULL, false },
	{ "sshfs_sync", K_NOTE, NULL, "close() already returns only once the "
	  "data is on the server's disk (commit=close)", NULL, false },
	{ "no_readahead", K_FIXED, "readahead=0", NULL, NULL, false },
	{ "sync_readdir", K_NOTE, NULL, "a directory comes in one streamed "
	  "reply", NULL, false },
	{ "sshfs_debug", K_NOTE, NULL, "-d logs every request", NULL, false },
	{ "-v", K_NOTE, NULL, "-d logs every request", NULL, false },
	{ "--verbose", K_NOTE, NULL, "-d logs every request", NULL, false },
	{ "dir_cache", K_MAP, NULL, NULL, map_dir_cache, false },
	{ "cache", K_MAP, NULL, NULL, map_dir_cache, false },
	{ "dcache_max_size", K_MAP, NULL, NULL, map_dcache_size, false },
	{ "cache_max_size", K_MAP, NULL, NULL, map_dcache_size, false },
	{ "dcache_timeout", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "dcache_stat_timeout", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "dcache_link_timeout", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "dcache_dir_timeout", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "dcache_clean_interval", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "dcache_min_clean_interval", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "cache_timeout", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "cache_stat_timeout", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "cache_link_timeout", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "cache_dir_timeout", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "cache_clean_interval", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "cache_min_clean_interval", K_NOTE, NULL, WHY_DCACHE, NULL, false },
	{ "direct_io", K_NOTE, NULL, "files are streamed ahead and behind "
	  "through the page cache instead", NULL, false },
	{ "workaround", K_NOTE, NULL, "they work around SFTP server bugs; "
	  "qftfs-server has its own protocol", NULL, false },
	{ "ssh_protocol", K_MAP, NULL, NULL, map_ssh_protocol, false },
	{ "-1", K_REFUSE, NULL, "ssh protocol 1 is not supported; remove -1",
	  NULL, false },
	{ "sftp_server", K_NOTE, NULL, "qftfs runs qftfs-server, not sftp "
	  "(-o server=CMD names it)", NULL, false },
	{ "directport", K_NOTE, NULL, "qftfs opens its own direct, "
	  "authenticated data connection", NULL, false },
	{ "passive", K_REFUSE, NULL, "passive (SFTP over stdin and stdout) is "
	  "not supported: qftfs starts qftfs-server itself; give host:dir or "
	  "a local directory as SOURCE", NULL, false },
	{ "disable_hardlink", K_NOTE, NULL, "link(2) works on qftfs", NULL,
	  false },
	{ "transform_symlinks", K_NOTE, NULL, "symlinks are shown as the "
	  "server stores them", NULL, false },
	{ "contain_symlinks", K_NOTE, NULL, "qftfs-server confines every path "
	  "below the served directory itself", NULL, false },
	{ "no_contain_symlinks", K_NOTE, NULL, "qftfs-server confines every "
	  "path below the served directory itself", NULL, false },
	/* follow_symlinks is a qftfs option of the same name (main.c): the
	 * server follows them, as sshfs's does. */
	{ "no_check_root", K_NOTE, NULL, "the server checks the directory "
	  "when it starts", NULL, false },
	{ "max_conns", K_NOTE, NULL, "qftfs streams bulk data and metadata "
	  "on two connections of its own", NULL, false },
	{ "-C", K_MAP, NULL, NULL, map_compression, false },
	{ "compression", K_MAP, NULL, NULL, map_compression, false },
	{ "writeback_cache", K_NOTE, NULL, "writes are streamed behind the "
	  "writer (-o window=)", NULL, false },
	{ "max_write", K_NOTE, NULL, "qftfs asks the kernel for the largest "
	  "writes it allows", NULL, false },
	{ "big_writes", K_NOTE, NULL, "large writes are always on with "
	  "FUSE 3", NULL, false },
	{ "large_read", K_NOTE, NULL, "reads are streamed ahead (-o "
	  "readahead=)", NULL, false },
	{ "max_read", K_REFUSE, NULL, "max_read= cannot be used: qftfs "
	  "decides the size of reads itself (-o readahead= sets how far "
	  "ahead it reads); remove the option", NULL, false },

	/* libfuse's high-level options, which sshfs accepts */
	{ "kernel_cache", K_NOTE, NULL, WHY_PAGECACHE, NULL, false },
	{ "auto_cache", K_NOTE, NULL, WHY_PAGECACHE, NULL, false },
	{ "noauto_cache", K_NOTE, NULL, WHY_PAGECACHE, NULL, false },
	{ "no_rofd_flush", K_NOTE, NULL, "a flush of a file opened only for "
	  "reading sends nothing to the server", NULL, false },
	{ "ac_attr_timeout", K_NOTE, NULL, WHY_PAGECACHE, NULL, false },
	{ "noforget", K_NOTE, NULL, WHY_INODES, NULL, false },
	{ "remember", K_NOTE, NULL, WHY_INODES, NULL, false },
	{ "hard_remove", K_NOTE, NULL, "an open file removed on the server "
	  "stays readable through its handle", NULL, false },
	{ "use_ino", K_NOTE, NULL, "inode numbers are the server's already",
	  NULL, false },
	{ "readdir_ino", K_NOTE, NULL, "inode numbers are the server's "
	  "already", NULL, false },
	{ "intr", K_NOTE, NULL, "every request has a deadline (-o timeout=)",
	  NULL, false },
	{ "intr_signal", K_NOTE, NULL, "every request has a deadline (-o "
	  "timeout=)", NULL, false },
	{ "nopath", K_NOTE, NULL, "the low-level client has no paths to "
	  "drop", NULL, false },
	{ "nonempty", K_NOTE, NULL, "FUSE 3 mounts over a non-empty "
	  "directory anyway", NULL, false },
	{ "modules", K_MAP, NULL, NULL, map_modules, false },
	{ "subdir", K_MAP, NULL, NULL, map_subdir, false },
	{ "rellinks", K_NOTE, NULL, "symlinks are shown as the server stores "
	  "them", NULL, false },
	{ "norellinks", K_NOTE, NULL, "symlinks are shown as the server "
	  "stores them", NULL, false },
	{ "from_code", K_MAP, NULL, NULL, map_charset, false },
	{ "to_code", K_MAP, NULL, NULL, map_charset, false },

	/* Words of an fstab line that mount(8) or systemd act on. */
	{ "_netdev", K_MOUNT, NULL, NULL, NULL, false },
	{ "nofail", K_MOUNT, NULL, NULL, NULL, false },
	{ "noauto", K_MOUNT, NULL, NULL, NULL, false },
	{ "auto", K_MOUNT, NULL, NULL, NULL, false },
	{ "user", K_MOUNT, NULL, NULL, NULL, false },
	{ "users", K_MOUNT, NULL, NULL, NULL, false },
	{ "nouser", K_MOUNT, NULL, NULL, NULL, false },
	{ "owner", K_MOUNT, NULL, NULL, NULL, false },
	{ "group", K_MOUNT, NULL, NULL, NULL, false },
	{ "defaults", K_MOUNT, NULL, NULL, NULL, false },
	{ "comment", K_MOUNT, NULL, NULL, NULL, false },
	{ "relatime", K_MOUNT, NULL, NULL, NULL, false },
	{ "norelatime", K_MOUNT, NULL, NULL, NULL, false },
	{ "strictatime", K_MOUNT, NULL, NULL, NULL, false },
	{ "lazytime", K_MOUNT, NULL, NULL, NULL, false },
	{ "nolazytime", K_MOUNT, NULL, NULL, NULL, false },
	{ "nodiratime", K_MOUNT, NULL, NULL, NULL, false },
	{ "diratime", K_MOUNT, NULL, NULL, NULL, false },
	{ "loud", K_MOUNT, NULL, NULL, NULL, false },
	{ "silent", K_MOUNT, NULL, NULL, NULL, false },
	/* A running mount's flags are the kernel's to change: mount(8)
	 * hands remount to mount.qftfs, which has it done (mount -i). */
	{ "remount", K_REFUSE, NULL, "-o remount: a mounted qftfs is "
	  "remounted (ro, rw) by `mount -o remount,ro MOUNTPOINT` through "
	  "mount.qftfs; qftfs's own options need a new mount", NULL, false },

	/* ssh_config(5) keywords, as `-o Keyword=value` */
	{ "Port", K_MAP, NULL, NULL, map_port, true },
	{ "User", K_MAP, NULL, NULL, map_user, true },
	{ "IdentityFile", K_MAP, NULL, NULL, map_same, true },
	{ "UserKnownHostsFile", K_MAP, NULL, NULL, map_same, true },
	{ "StrictHostKeyChecking", K_MAP, NULL, NULL, map_same, true },
	{ "ServerAliveInterval", K_MAP, NULL, NULL, map_alive_interval, true },
	{ "ServerAliveCountMax", K_MAP, NULL, NULL, map_alive_count, true },
	{ "Compression", K_MAP, NULL, NULL, map_compression, true },
	{ "BatchMode", K_MAP, NULL, NULL, map_batch, true },
	{ "ProxyJump", K_MAP, NULL, NULL, map_openssh, true },
	{ "ProxyCommand", K_MAP, NULL, NULL, map_openssh, true },
	{ "CertificateFile", K_MAP, NULL, NULL, map_openssh, true },
	{ "Host", K_REFUSE, NULL, "Host blocks belong in ~/.ssh/config", NULL,
	  true },
	{ "Match", K_REFUSE, NULL, "Match blocks belong in ~/.ssh/config",
	  NULL, true },
	{ "Include", K_REFUSE, NULL, "Include belongs in ~/.ssh/config", NULL,
	  true },
	{ "Ciphers", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "Cipher", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "MACs", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "KexAlgorithms", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "HostKeyAlgorithms", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "PubkeyAcceptedKeyTypes", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "PubkeyAcceptedAlgorithms", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL,
	  true },
	{ "HostbasedAcceptedAlgorithms", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL,
	  true },
	{ "CASignatureAlgorithms", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "CompressionLevel", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "RekeyLimit", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "RequiredRSASize", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "FingerprintHash", K_NOTE, NULL, WHY_SSH_CRYPTO, NULL, true },
	{ "PasswordAuthentication", K_NOTE, NULL, WHY_SSH_AUTH, NULL, true },
	{ "PubkeyAuthentication", K_NOTE, NULL, WHY_SSH_AUTH, NULL, true },
	{ "KbdInteractiveAuthentication", K_NOTE, NULL, WHY_SSH_AUTH, NULL,
	  true },
	{ "KbdInteractiveDevices", K_NOTE, NULL, WHY_SSH_AUTH, NULL, true },
	{ "ChallengeResponseAuthentication", K_NOTE, NULL, WHY_SSH_AUTH, NULL,
	  true },
	{ "PreferredAuthentications", K_NOTE, NULL, WHY_SSH_AUTH, NULL, true },
	{ "NumberOfPasswordPrompts", K_NOTE, NULL, WHY_SSH_AUTH, NULL, true },
	{ "GSSAPIAuthentication", K_NOTE, NULL, WHY_SSH_AUTH, NULL, true },
	{ "GSSAPIDelegateCredentials", K_NOTE, NULL, WHY_SSH_AUTH, NULL,
	  true },
	{ "HostbasedAuthentication", K_NOTE, NULL, WHY_SSH_AUTH, NULL, true },
	{ "IdentitiesOnly", K_MAP, NULL, NULL, map_identities_only, true },
	{ "IdentityAgent", K_NOTE, NULL, "the agent is the one in "
	  "SSH_AUTH_SOCK", NULL, true },
	{ "AddKeysToAgent", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ConnectTimeout", K_NOTE, NULL, "connecting is bounded by -o "
	  "timeout=", NULL, true },
	{ "ConnectionAttempts", K_NOTE, NULL, "the mount reconnects by itself "
	  "(-o reconnect=)", NULL, true },
	{ "TCPKeepAlive", K_NOTE, NULL, "qftfs probes its connections itself "
	  "(-o keepalive=)", NULL, true },
	{ "GlobalKnownHostsFile", K_NOTE, NULL, "host keys are checked "
	  "against UserKnownHostsFile", NULL, true },
	{ "CheckHostIP", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "HashKnownHosts", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "HostKeyAlias", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "NoHostAuthenticationForLocalhost", K_NOTE, NULL, WHY_SSH_PROG,
	  NULL, true },
	{ "UpdateHostKeys", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "VerifyHostKeyDNS", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "VisualHostKey", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "HostName", K_NOTE, NULL, "give the host in SOURCE (host:dir) or "
	  "in ~/.ssh/config", NULL, true },
	{ "AddressFamily", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "BindAddress", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "BindInterface", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "IPQoS", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "LogLevel", K_NOTE, NULL, "-d prints qftfs's own debugging output",
	  NULL, true },
	{ "ControlMaster", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ControlPath", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ControlPersist", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ForwardAgent", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ForwardX11", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ForwardX11Trusted", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "LocalForward", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "RemoteForward", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "DynamicForward", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ClearAllForwardings", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ExitOnForwardFailure", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "EscapeChar", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "RequestTTY", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "SendEnv", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "SetEnv", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "LocalCommand", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "PermitLocalCommand", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "Tunnel", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "TunnelDevice", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "SmartcardDevice", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "PKCS11Provider", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "SecurityKeyProvider", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "StreamLocalBindMask", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "StreamLocalBindUnlink", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "UsePrivilegedPort", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "RhostsRSAAuthentication", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "RSAAuthentication", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "Protocol", K_NOTE, NULL, "ssh protocol 2 is the only one", NULL,
	  true },
	{ "CanonicalDomains", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "CanonicalizeHostname", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "CanonicalizeFallbackLocal", K_NOTE, NULL, WHY_SSH_PROG, NULL,
	  true },
	{ "CanonicalizeMaxDots", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "CanonicalizePermittedCNAMEs", K_NOTE, NULL, WHY_SSH_PROG, NULL,
	  true },
	{ "IgnoreUnknown", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "KnownHostsCommand", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "LogVerbose", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ObscureKeystrokeTiming", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "RevokedHostKeys", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "SessionType", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "StdinNull", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ForkAfterAuthentication", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "ProxyUseFdpass", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "EnableSSHKeysign", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
	{ "EnableEscapeCommandline", K_NOTE, NULL, WHY_SSH_PROG, NULL, true },
};

void qc_compat_init(struct qc_compat *c)
{
	memset(c, 0, sizeof(*c));
	c->alive_interval = -1;
	c->alive_count = -1;
}

void qc_compat_free(struct qc_compat *c)
{
	for (size_t i = 0; i < c->n_native; i++)
		free(c->native[i]);
	for (size_t i = 0; i < c->n_notes; i++)
		free(c->notes[i]);
	c->n_native = c->n_notes = 0;
}

static const struct entry *lookup(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const struct entry *e = &table[i];

		if (strlen(e->name) != len)
			continue;
		/* ssh matches its keywords ignoring case; sshfs and FUSE
		 * options are lower case. */
		if (e->ssh ? strncasecmp(e->name, name, len) == 0 :
			     strncmp(e->name, name, len) == 0)
			return e;
	}
	return NULL;
}

int qc_compat_option(struct qc_compat *c, const char *opt)
{
	const char *eq = strchr(opt, '=');
	size_t len = eq ? (size_t)(eq - opt) : strlen(opt);
	const char *val = eq ? eq + 1 : NULL;
	const struct entry *e;
	char name[64];
	int r;

	if (strncmp(opt, "x-", 2) == 0)
		return QC_COMPAT_DONE;          /* x-systemd.*, x-gvfs-* */
	e = lookup(opt, len);
	if (!e) {
		/* An ssh keyword we do not know: ssh itself would refuse it
		 * ("Bad configuration option"), so say so here rather than
		 * as libfuse's "unknown option". */
		if (opt[0] >= 'A' && opt[0] <= 'Z' && eq) {
			fprintf(stderr, "qftfs: unknown ssh option '%.*s'\n",
				(int)len, opt);
			return -EINVAL;
		}
		return QC_COMPAT_FUSE;
	}
	snprintf(name, sizeof(name), "%s", e->name);
	switch (e->kind) {
	case K_FIXED:
		r = add_native(c, e->to, NULL);
		break;
	case K_MAP:
		r = e->map(c, name, val);
		break;
	case K_NOTE:
		r = add_note(c, name, e->why);
		break;
	case K_MOUNT:
		r = 0;
		break;
	case K_REFUSE:
	default:
		fprintf(stderr, "qftfs: %s\n", e->why);
		r = -EINVAL;
		break;
	}
	return r < 0 ? r : QC_COMPAT_DONE;
}

int qc_compat_finish(struct qc_compat *c)
{
	char v[32];
	/* ssh's defaults: no probes, and 3 unanswered ones end it; qftfs
	 * probes every 10 s by default. */
	long interval = c->alive_interval, count = c->alive_count;
	int r;

	if (interval < 0 && count < 0)
		return 0;
	if (interval >= 0) {
		snprintf(v, sizeof(v), "%ld", interval);
		r = add_native(c, "keepalive", v);
		if (r < 0)
			return r;
	}
	if (interval == 0)
		return 0;   /* probes off: the deadline stays the default */
	if (interval < 0)
		interval = 10;
	if (count < 0)
		count = 3;
	/* ssh gives up after `count` unanswered probes `interval` apart. */
	snprintf(v, sizeof(v), "%ld", interval * count);
	return add_native(c, "timeout", v);
}

void qc_compat_print_notes(const struct qc_compat *c)
{
	for (size_t i = 0; i < c->n_notes; i++)
		fprintf(stderr, "qftfs: note: %s\n", c->notes[i]);
}

void qc_compat_help(void)
{
	printf(
"sshfs and ssh options (so an sshfs command line or fstab line works):\n"
"    -o reconnect           reconnect=yes\n"
"    -C, -o compression=yes, -o Compression=yes\n"
"                           compress=auto\n"
"    -o ServerAliveInterval=N, -o ServerAliveCountMax=M\n"
"                           keepalive=N, timeout=N*M (M defaults to 3)\n"
"    -o no_readahead        readahead=0\n"
"    -o dir_cache=no        dircache=0 (dcache_max_size=N: dircache=N)\n"
"    -o idmap=user|file, -o uidfile=FILE, -o gidfile=FILE,\n"
"    -o nomap=ignore|error, -o uid=N, -o gid=N, -o umask=M\n"
"                           owner and mode mapping (see qftfs(1))\n"
"    -o subdir=DIR          serve DIR below the source's directory\n"
"    -o Port=, User=, IdentityFile=, UserKnownHostsFile=,\n"
"       StrictHostKeyChecking=, BatchMode=\n"
"                           as in ssh_config(5)\n"
"    other sshfs and ssh options are accepted with a note saying why\n"
"    qftfs does not need them; passive and -1 are refused with the\n"
"    reason; ProxyJump=, ProxyCommand=, CertificateFile= and\n"
"    -o ssh_command=CMD log in with the OpenSSH client; fstab words\n"
"    (_netdev, nofail, noauto, user, x-systemd.*) are for mount(8)\n"
"\n");
}
