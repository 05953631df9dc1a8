/* SPDX-License-Identifier: MIT */
/*
 * The client's inode table.  The protocol names objects by path, the kernel
 * by node id; a node is one object of the server (one inode), known by one
 * or more names, and the table turns a node id back into a path by walking
 * up to the root from one of them.
 *
 * A node's id is its address (the root is FUSE_ROOT_ID).  It lives while
 * the kernel holds lookups on it (nlookup, from entry replies, dropped by
 * FORGET) or anything else refers to it (refs: the names of its children,
 * which point to their parent, and open files).  Names are found by
 * (parent, name) in a hash, so looking up the same name twice gives the
 * same node.  A name that leads to a non-directory the table already has
 * (the same server inode number, and a link count above one: a hard
 * link) is added to that node, so that every name of a hard-linked file
 * is one kernel inode: one page cache, one st_ino, one link count, as on a
 * local disk.  Directories have one name each.
 *
 * A node with several names uses the one confirmed last (looked up,
 * linked or renamed to) for path-based requests.  Unlink, rmdir and a
 * rename over an existing name take that name from its node; a node whose
 * last name goes is detached: operations on it by path fail with ENOENT,
 * and its open files keep working through their handles (qn_file_borrow).
 *
 * One mutex, qn_table.lock, guards every field marked "table lock" in all
 * nodes and names; no node field is read or written without it, and
 * nothing outside the table's files (node.c, node_name.c, node_file.c)
 * takes it: the functions below do.  Lock order: the table lock, then an
 * open file's own lock (qn_for_each_file's callback); never the other way
 * round.
 *
 * Error convention: 0 (or a length) or a negative errno.
 */
#ifndef QN_NODE_H
#define QN_NODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msg.h"

struct qn_node;

/*
 * Links an open handle to its node.  Embedded in the client's per-handle
 * state; the table only counts and lists it.
 */
struct qn_file {
	struct qn_node *node;   /* set by qn_file_attach; holds a ref */
	struct qn_file *next;   /* table lock: node's list of open files */
	unsigned refs;          /* table lock: 1 for the kernel + borrowers */
	bool listed;            /* table lock: on node's list */
	/* set before qn_file_attach: opened read-only, neither creating
	 * nor truncating, so nothing through it changes the file's
	 * attributes */
	bool rdonly;
	uint64_t handle;        /* set on attach; later only by its owner,
				 * under its own lock (re-opening after a
				 * reconnect) */
};

/* One name of a node: `name` in directory `parent`. */
struct qn_name {
	struct qn_node *parent; /* table lock; holds a ref */
	struct qn_node *node;   /* table lock: the node it names */
	struct qn_name *hnext;  /* table lock: hash chain */
	struct qn_name *next;   /* table lock: the node's other names */
	char name[];            /* NUL-terminated */
};

struct qn_node {
	/* table lock: the names it is known by, the one for paths first;
	 * NULL when detached, and for the root */
	struct qn_name *names;
	struct qn_node *anext, *aprev; /* table lock: list of all nodes */
	/* table lock: chain of the object hash, and whether on it: a named
	 * non-directory with a known server inode (qn_lookup's hard links) */
	struct qn_node *onext;
	bool ohashed;
	uint64_t nlookup;       /* table lock: kernel lookups not forgotten */
	uint64_t refs;          /* table lock: children and open files */
	uint64_t rino;          /* table lock: server inode number */
	/* table lock: the inode number the kernel is shown for this node
	 * when it is not rino (qn_provisional_ino), else 0 */
	uint64_t vino;
	struct qn_node *vnext;  /* table lock: chain of the vino hash */
	bool vhashed;           /* table lock: on it (vino and rino set) */
	uint32_t rtype;         /* table lock: server file type bits */
	/* table lock: size and mtime last seen, to decide whether cached
	 * pages survive an open; with ctime, whether attributes changed */
	uint64_t size;
	struct qft_time mtime;
	struct qft_time ctime;
	/* table lock: CLOCK_MONOTONIC ns of the last change of the object's
	 * attributes the table saw (other values in fresh attributes) or
	 * could not see (a file opened or released: writes change size and
	 * times); 0 = none.  Attributes fetched before it are stale. */
	uint64_t changed_ns;
	/* table lock: the newest changed_ns of a child freed since: what a
	 * freed child's own stamp said is not forgotten with it */
	uint64_t child_changed_ns;
	/* table lock: all attributes last seen (mode 0: none yet); a node
	 * made by a pipelined CREATE has predicted ones and rino 0 until
	 * the server answers (qn_note_created) */
	struct qft_attr attr;
	/* table lock: CLOCK_MONOTONIC ns until which `attr` may answer a
	 * getattr without asking (qn_note_fresh); 0 = not */
	uint64_t attr_until;
	/* table lock: bumped by every change sent that makes `attr` stale,
	 * so an answer read around it is not taken as fresh */
	uint64_t attr_gen;
	uint64_t attr_ns;       /* table lock: ns_gen when attr_until was set */
	/* table lock: a read of it was answered and its size and mtime did
	 * not change since, so the kernel may hold its pages (an OPEN then
	 * does not ask for the first data) */
	bool paged;
	/* table lock: the size and times the file had when the open whose
	 * read set `paged` was answered (its pages are of that file or of
	 * a later one); paged_known false when that open did not say */
	bool paged_known;
	uint64_t paged_size;
	struct qft_time paged_mtime, paged_ctime;
	/* table lock: CLOCK_MONOTONIC ns until which the object is known to
	 * have no extended attributes (QFT_ATTR_NOXATTR); 0 = not known */
	uint64_t noxattr_until;
	/* table lock: CLOCK_MONOTONIC ns until which the directory is
	 * known to have no default ACL (hints.h); 0 = not known */
	uint64_t nodefacl_until;
	struct qn_file *files;  /* table lock: open files of this node */
};

struct qn_table {
	pthread_mutex_t lock;
	struct qn_node root;    /* never freed; has no name and no parent */
	struct qn_name **buckets;  /* lock: names by (parent, name) */
	size_t nbuckets;        /* lock: a power of two */
	size_t count;           /* lock: hashed names */
	/* lock: named non-directories by server inode (qn_node.ohashed),
	 * ocount of them */
	struct qn_node **obuckets;
	size_t nobuckets;       /* lock: a power of two */
	size_t ocount;          /* lock */
	/*
	 * lock: nodes with a provisional inode number and a known server
	 * one, by server inode (qn_shown_ino); vcount of them
	 */
	struct qn_node **vbuckets;
	size_t nvbuckets;       /* lock: a power of two */
	size_t vcount;          /* lock */
	uint64_t next_vino;     /* lock: the next provisional number */
	/* lock: bumped by every change of names (unlink, rename, link),
	 * which can change the link count or ctime of any node: fresh
	 * attributes (qn_note_fresh) are trusted only within one */
	uint64_t ns_gen;
};

int qn_table_init(struct qn_table *t);
/*
 * Frees every node, once no request can run.  Files still open (the kernel
 * connection ended without releasing them) go to `drop_file`.
 */
void qn_table_destroy(struct qn_table *t,
		      void (*drop_file)(struct qn_file *f));

/* Node of a kernel node id, and back. */
struct qn_node *qn_from_ino(struct qn_table *t, uint64_t ino);
uint64_t qn_to_ino(struct qn_table *t, struct qn_node *n);

/*
 * Writes the path of `n`, followed by "/name" when `name` is not NULL, to
 * buf (at least QFT_MAX_PATH + 1 bytes); returns its length.  "" is the
 * root.  -ENOENT when `n` or an ancestor is detached, -ENAMETOOLONG past
 * QFT_MAX_PATH.
 */
int qn_path(struct qn_table *t, struct qn_node *n, const char *name,
	    char *buf);

/*
 * Records a kernel lookup of `name` in `parent` whose attributes are `a`:
 * returns the node (created if needed) with nlookup incremented, or NULL
 * when out of memory.  A known name whose server inode or type changed
 * gets a new node, so the kernel never sees an inode change its type.
 */
struct qn_node *qn_lookup(struct qn_table *t, struct qn_node *parent,
			  const char *name, const struct qft_attr *a);

/*
 * A LINK of `n` answered with attributes `a`: `name` in `parent` is one
 * more name of `n` (a name there before leaves its node), the one for
 * paths from now on; nlookup is incremented as by qn_lookup.  Returns `n`,
 * or NULL when out of memory.
 */
struct qn_node *qn_link(struct qn_table *t, struct qn_node *n,
			struct qn_node *parent, const char *name,
			const struct qft_attr *a);

/* Drops `n` kernel lookups (FORGET). */
void qn_forget(struct qn_table *t, struct qn_node *n, uint64_t nlookup);

/*
 * Takes `name` in `parent` from its node, if any (unlink, rmdir): the node
 * is detached when that was its last name, and otherwise keeps its other
 * names with its attributes stale (link count and ctime changed).
 */
void qn_remove(struct qn_table *t, struct qn_node *parent, const char *name);

/*
 * Moves (or with `exchange` swaps) names after a successful rename.  A
 * name renamed over loses its node as qn_remove; two names of one node
 * stay as they are (rename(2) of a link onto another link of the same
 * file does nothing).
 */
void qn_rename(struct qn_table *t, struct qn_node *parent, const char *name,
	       struct qn_node *newparent, const char *newname, bool exchange);

/*
 * Remembers size and mtime from fresh attributes.  With `same` non-NULL,
 * also says whether they equal what was known before (so cached pages of
 * the file are still valid).
 */
void qn_note_attr(struct qn_table *t, struct qn_node *n,
		  const struct qft_attr *a, bool *same);

/* Whether attributes `a` name another object than node `n` knew: another
 * type, or with `ino_too`, another inode. */
bool qn_replaced(struct qn_table *t, struct qn_node *n,
		 const struct qft_attr *a, bool ino_too);

/* The NOXATTR hint of `n` (see qn_node.noxattr_until): set (0 forgets it)
 * and read. */
void qn_set_noxattr_until(struct qn_table *t, struct qn_node *n,
			  uint64_t until);
uint64_t qn_noxattr_until(struct qn_table *t, struct qn_node *n);

/* The default-ACL hint of directory `n` (see qn_node.nodefacl_until):
 * set (0 forgets it) and read. */
void qn_set_nodefacl_until(struct qn_table *t, struct qn_node *n,
			   uint64_t until);
uint64_t qn_nodefacl_until(struct qn_table *t, struct qn_node *n);

/*
 * References for the directory cache (dircache.c), which keys listings by
 * node: a node with references stays in the table (and keeps its id)
 * even when the kernel forgot it.
 */
void qn_ref(struct qn_table *t, struct qn_node *n);
void qn_unref(struct qn_table *t, struct qn_node *n);

/*
 * The node of `name` in `parent` with attributes `a`, made if needed, with
 * a reference (not a kernel lookup); a known name whose server inode or
 * type changed gets a new node as in qn_lookup.  NULL when out of memory.
 */
struct qn_node *qn_child_ref(struct qn_table *t, struct qn_node *parent,
			     const char *name, const struct qft_attr *a);

/* The node called `name` in `parent`, with a reference; NULL if none. */
struct qn_node *qn_find_ref(struct qn_table *t, struct qn_node *parent,
			    const char *name);

/*
 * The parent of `n` (with a reference, to be dropped with qn_unref) and
 * n's name, copied to `name` (QFT_MAX_NAME + 1 bytes).  -ENOENT for the
 * root and for a detached node.
 */
int qn_parent_ref(struct qn_table *t, struct qn_node *n,
		  struct qn_node **parent, char *name);

/*
 * Inode numbers as the kernel is shown them.  A file made by a pipelined
 * CREATE has no server inode number until the server answers, but a
 * program may fstat it at once (cp does) and must never see st_ino
 * change (sqlite takes that for a database moved away).  Such a node is
 * given a provisional number from a range no filesystem hands out (the
 * top bit set), and keeps showing it while the node lives -- for every
 * name of the same server inode, so hard links still share st_ino.  When
 * the node is forgotten, later lookups show the server's number again:
 * like a local filesystem after its inode cache let the file go, and as
 * sshfs does always.
 */
#define QN_VINO_BASE ((uint64_t)1 << 63)

/* Gives `n` a provisional inode number (before its attributes reach the
 * kernel); returns it. */
uint64_t qn_provisional_ino(struct qn_table *t, struct qn_node *n);
/*
 * The inode number to show for server inode `rino`, of node `n` when
 * known (NULL: a directory entry whose node is not at hand; then `dir`
 * and `name` find it if `rino` is 0, a create not answered yet).
 */
uint64_t qn_shown_ino(struct qn_table *t, struct qn_node *n, uint64_t rino);
uint64_t qn_shown_child_ino(struct qn_table *t, struct qn_node *dir,
			    const char *name, uint64_t rino);

/* The server inode number last seen for `n` (0 = unknown). */
uint64_t qn_rino(struct qn_table *t, struct qn_node *n);

/*
 * Whether attributes of `name` in `parent` fetched at `since`
 * (CLOCK_MONOTONIC ns, when the request was sent) can still be trusted as
 * far as this client knows: no file of it open for writing now (read-only
 * ones and directories may be open), and no change stamped
 * (qn_node.changed_ns) since.
 */
bool qn_attr_trusted(struct qn_table *t, struct qn_node *parent,
		     const char *name, uint64_t since);

/* Stamps `n` as changed now (its attributes fetched before are stale). */
void qn_touch(struct qn_table *t, struct qn_node *n);

/*
 * The server's attributes for a node made with predicted ones (rino 0) by
 * a pipelined CREATE: from now on it is that inode.  A node that already
 * knows its inode keeps it.
 */
void qn_note_created(struct qn_table *t, struct qn_node *n,
		     const struct qft_attr *a);

/*
 * Freshness of a node's attributes for getattr.  qn_attr_gen before a
 * request, qn_note_fresh with its answer: trusted until `until` unless a
 * change went out meanwhile (qn_attr_stale, called before sending one).
 */
uint64_t qn_attr_gen(struct qn_table *t, struct qn_node *n);
void qn_note_fresh(struct qn_table *t, struct qn_node *n,
		   const struct qft_attr *a, uint64_t gen, uint64_t until);
void qn_attr_stale(struct qn_table *t, struct qn_node *n);
/* qn_attr_stale of f's node, if f is still attached (one lock: the
 * write path calls it for every WRITE). */
void qn_file_attr_stale(struct qn_table *t, struct qn_file *f);
/* A name was linked, unlinked or renamed: no attributes are fresh. */
void qn_names_changed(struct qn_table *t);
/* The server told of a change of `name` in `parent`: its node's
 * attributes are not fresh any more (qn_note_fetched), and the name,
 * which may be gone, is the last of its node's names for paths. */
void qn_child_attr_stale(struct qn_table *t, struct qn_node *parent,
			 const char *name);
/* qn_attr_gen of `name` in `parent`, or 0 (a new node's) when it has no
 * node yet: taken before a LOOKUP of it, for qn_note_fetched. */
uint64_t qn_child_attr_gen(struct qn_table *t, struct qn_node *parent,
			   const char *name);
/*
 * The server's answer to a LOOKUP or GETATTR of `n` sent when its
 * attr_gen was `gen`: what the kernel was told it may keep until `until`
 * (attr_timeout) also answers the getattr it asks again meanwhile (after
 * a read, which drops only its atime), so that an answer the client holds
 * needs no server -- nor waits for one while the link is down.  For a
 * node other than a directory (a directory's times change with what is
 * made in it), with one link (a name of it looked up while it had one
 * is another node, and a write through it would not show),
 * not open for writing (writes change it behind the answer); for any
 * other, nothing is noted.
 */
void qn_note_fetched(struct qn_table *t, struct qn_node *n,
		     const struct qft_attr *a, uint64_t gen, uint64_t until);
/* The attributes of `n` if still trusted at `now`, with the seconds left. */
bool qn_fresh_attr(struct qn_table *t, struct qn_node *n, uint64_t now,
		   struct qft_attr *out, double *left);

/*
 * The same for the node of open file `f`, done under the table lock so
 * that a release racing with a completion cannot free the node between
 * finding and using it; nothing when f is detached already.  `created`:
 * as qn_note_created, else qn_note_attr.
 */
void qn_file_note_attr(struct qn_table *t, struct qn_file *f,
		       const struct qft_attr *a, bool created);
/* qn_note_fresh of f's node, if f is still attached. */
void qn_file_note_fresh(struct qn_table *t, struct qn_file *f,
			const struct qft_attr *a, uint64_t gen,
			uint64_t until);
/* qn_replaced (inode too) of f's node; false when f is detached. */
bool qn_file_replaced(struct qn_table *t, struct qn_file *f,
		      const struct qft_attr *a);
/* qn_unlink_node of f's node, if f is still attached. */
void qn_file_unlink_node(struct qn_table *t, struct qn_file *f);

/* The kernel got data of `n` (a read was answered) through a file
 * opened when `n` had attributes `opened` (NULL: not known), or whether
 * it did. */
void qn_note_paged(struct qn_table *t, struct qn_node *n,
		   const struct qft_attr *opened);
bool qn_paged(struct qn_table *t, struct qn_node *n);
/*
 * Whether the pages the kernel may hold of `n` are those of the file
 * with attributes `a`: they were read through a file opened with the
 * same size, mtime and ctime, and no change was noted since.  False
 * where that is not known.
 */
bool qn_pages_valid(struct qn_table *t, struct qn_node *n,
		    const struct qft_attr *a);
/*
 * The attributes the file had when the pages the kernel may hold of `n`
 * were read (ino, size, mtime and ctime as then; the rest as last seen):
 * false when it holds none, or that is not known.
 */
bool qn_paged_attr(struct qn_table *t, struct qn_node *n,
		   struct qft_attr *out);

/* The attributes last seen of `n` into *out; false when none were. */
bool qn_get_attr(struct qn_table *t, struct qn_node *n, struct qft_attr *out);

/*
 * Detaches `n` itself, if it still has a name (a pipelined CREATE that
 * the server refused: the name the kernel was given does not exist).
 * Unlike qn_remove, a node that took the name since is left alone.
 */
void qn_unlink_node(struct qn_table *t, struct qn_node *n);

/* Open files: attach on open (refs = 1), detach on release. */
void qn_file_attach(struct qn_table *t, struct qn_node *n, struct qn_file *f,
		    uint64_t handle);
/* Takes one of the node's open files, with a reference; NULL if none. */
struct qn_file *qn_file_borrow(struct qn_table *t, struct qn_node *n);
/*
 * Drop a borrower's reference (put), or the kernel's reference and the
 * listing (detach, on release).  They return true when that was the last
 * reference: the node's reference is gone too, and the caller closes the
 * handle and frees the file.
 */
bool qn_file_put(struct qn_table *t, struct qn_file *f);
bool qn_file_detach(struct qn_table *t, struct qn_file *f);

/* The node of an open file (NULL once the table dropped it). */
struct qn_node *qn_file_node(struct qn_table *t, struct qn_file *f);

/*
 * Calls fn for each open file of `n` (none when `n` is NULL) with the
 * table lock held, until fn returns true.  fn may take the file's own lock
 * (table lock first, then a file's: the one lock order), must not call
 * any qn_ function, and must not wait.
 */
void qn_for_each_file(struct qn_table *t, struct qn_node *n,
		      bool (*fn)(struct qn_file *f, void *ctx), void *ctx);

#endif /* QN_NODE_H */
