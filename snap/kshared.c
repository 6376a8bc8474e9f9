/* snap: kernel objects held by several processes of the tree (version 6): an
 * eventfd, timer, epoll set or socket inherited over fork and kept by both, a
 * socket pair split between parent and child. Each is captured once into the
 * root's table, made once in the root before the tree is forked and handed
 * to every holder from there, as the pipes are (skeleton.c). */
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "codec/codec.h"
#include "snap/snap-internal.h"

/* One object of one process's table, and the group of the open file it is. */
struct kref {
	struct snap_state *p;
	size_t k;               /* the process: 0 the root, i + 1 procs[i] */
	struct snap_object *o;
	size_t g;
};

struct kgroups {
	struct kref *r;
	size_t n, ng;
	uint8_t *tree;          /* per group: in the tree's table */
	size_t *rep;            /* per group: the ref captured into the table */
	size_t *peer;           /* per group: a pair's or slave's other group, or SIZE_MAX */
	uint32_t *num;          /* per group: its number in the table (1..), 0 none */
};

static struct snap_state *proc_of(struct snap_state *root, size_t k)
{
	return k ? &root->procs[k - 1] : root;
}

static int same_file(const pid_t *hosts, const struct kref *a, const struct kref *b)
{
	if (a->o->kind != b->o->kind)
		return 0;
	/* a socket has one open file: its inode names it */
	if (a->o->kind == SNAP_OBJ_UNIX)
		return a->o->ino == b->o->ino;
	return syscall(SYS_kcmp, hosts[a->k], hosts[b->k], KCMP_FILE, a->o->fd, b->o->fd) == 0;
}

/* Every object of every process, grouped by its open file (in order of first
 * use: by process, then fd). */
static void group_refs(struct snap_state *root, const pid_t *hosts, struct kgroups *g)
{
	size_t cap = 0;
	for (size_t k = 0; k <= root->nprocs; k++)
		cap += proc_of(root, k)->nobjects;
	g->r = common_xcalloc(cap + 1, sizeof *g->r);
	for (size_t k = 0; k <= root->nprocs; k++) {
		struct snap_state *p = proc_of(root, k);
		for (size_t i = 0; i < p->nobjects; i++) {
			struct kref *r = &g->r[g->n++];
			*r = (struct kref){ p, k, &p->objects[i], SIZE_MAX };
			for (size_t q = 0; q + 1 < g->n && r->g == SIZE_MAX; q++)
				if (g->r[q].k != k && same_file(hosts, r, &g->r[q]))
					r->g = g->r[q].g;
			if (r->g == SIZE_MAX)
				r->g = g->ng++;
		}
	}
	g->tree = common_xcalloc(g->ng + 1, 1);
	g->rep = common_xcalloc(g->ng + 1, sizeof *g->rep);
	g->peer = common_xcalloc(g->ng + 1, sizeof *g->peer);
	g->num = common_xcalloc(g->ng + 1, sizeof *g->num);
	for (size_t i = 0; i < g->ng; i++)
		g->rep[i] = g->peer[i] = SIZE_MAX;
	/* held by several, or an end whose pair is elsewhere; or at a
	 * descriptor 0-2, which a process's own table cannot name (its pairs'
	 * peer 0 is none) */
	for (size_t i = g->n; i-- > 0;) {
		const struct kref *r = &g->r[i];
		g->tree[r->g] |= g->rep[r->g] != SIZE_MAX || r->o->remote || r->o->fd <= 2;
		g->rep[r->g] = i;
	}
}

/* "the root process" or "process N" (its namespace pid), for messages. */
static const char *holder_name(const struct kref *r, char buf[32])
{
	if (!r->k)
		return "the root process";
	snprintf(buf, 32, "process %u", r->p->pid);
	return buf;
}

/* The group of a pair end's other end or a slave's master, anywhere in the run. */
static int other_end(const struct kgroups *g, const struct kref *r, struct common_err *e)
{
	const struct snap_object *o = r->o;
	for (size_t q = 0; q < g->n; q++) {
		const struct snap_object *x = g->r[q].o;
		if (o->kind == SNAP_OBJ_UNIX && x->kind == SNAP_OBJ_UNIX && x->ino == o->peer_ino) {
			if (x->state != SNAP_SOCK_PAIRED || x->peer_ino != o->ino || x->type != o->type)
				break;
			return (int)g->r[q].g;
		}
		if (o->kind == SNAP_OBJ_PTY_SLAVE && x->kind == SNAP_OBJ_PTY_MASTER &&
		    x->index == o->index)
			return (int)g->r[q].g;
	}
	char who[32];
	if (o->kind == SNAP_OBJ_PTY_SLAVE)
		return common_errf(e, "capture", "fd %u of %s: a pty slave whose master the run "
				   "does not hold is not supported", o->fd, holder_name(r, who));
	return common_errf(e, "capture", "fd %u of %s: a Unix socket connected to one outside "
			   "the run (or not back to it) is not supported", o->fd, holder_name(r, who));
}

/* Both ends of a pair or pty are made together: one in the table brings the other. */
static int tie_ends(struct kgroups *g, struct common_err *e)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct snap_object *o = g->r[i].o;
		if ((o->kind != SNAP_OBJ_UNIX || o->state != SNAP_SOCK_PAIRED) &&
		    o->kind != SNAP_OBJ_PTY_SLAVE)
			continue;
		int other = other_end(g, &g->r[i], e);
		if (other < 0)
			return -1;
		g->peer[g->r[i].g] = (size_t)other;
	}
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = 0; i < g->ng; i++)
			if (g->peer[i] != SIZE_MAX && g->tree[i] != g->tree[g->peer[i]]) {
				g->tree[i] = g->tree[g->peer[i]] = 1;
				changed = 1;
			}
	}
	return 0;
}

/* An epoll set's watches name descriptors of the process restoring them: of
 * a set several hold, the first holder where every watched one is open. */
static int epoll_owners(struct kgroups *g, struct common_err *e)
{
	for (size_t i = 0; i < g->n; i++) {
		struct kref *r = &g->r[i];
		if (r->o->kind != SNAP_OBJ_EPOLL || !r->o->stale)
			continue;
		if (!g->tree[r->g])
			return snap_epoll_stale(r->o, e);
		if (g->rep[r->g] != i)
			continue;
		size_t q = i + 1;
		while (q < g->n && (g->r[q].g != r->g || g->r[q].o->stale))
			q++;
		char who[32];
		if (q == g->n)
			return common_errf(e, "capture", "fd %u of %s: an epoll set held by several "
					   "processes watches descriptors that no one of them holds "
					   "all of is not supported", r->o->fd, holder_name(r, who));
		g->rep[r->g] = q;
	}
	return 0;
}

/* A restore's re-check: a timer moved with the clock; the restored one stands for it. */
static void expected_timer(const struct snap_state *expect, struct snap_object *o)
{
	const struct snap_object *x = expect && o->fd <= expect->nkobjs ? &expect->kobjs[o->fd - 1]
									: NULL;
	if (x && x->kind == SNAP_OBJ_TIMERFD && x->clock == o->clock &&
	    x->interval[0] == o->interval[0] && x->interval[1] == o->interval[1]) {
		o->ticks = x->ticks;
		memcpy(o->value, x->value, sizeof o->value);
	}
}

/* The table in group order; every holder's descriptors name it, its own
 * copies dropped from the processes' tables. */
static int build_table(struct snap_state *root, struct kgroups *g, const struct snap_state *expect,
		       struct common_err *e)
{
	size_t n = 0;
	for (size_t i = 0; i < g->ng; i++)
		if (g->tree[i])
			g->num[i] = (uint32_t)++n;
	if (n > SNAP_OBJ_MAX)
		return common_errf(e, "capture", "more than %u objects held by several processes",
				   SNAP_OBJ_MAX);
	root->kobjs = common_xcalloc(n + 1, sizeof *root->kobjs);
	root->nkobjs = n;
	for (size_t i = 0; i < g->ng; i++) {
		if (!g->tree[i])
			continue;
		const struct kref *r = &g->r[g->rep[i]];
		struct snap_object *o = &root->kobjs[g->num[i] - 1];
		*o = *r->o;
		memset(r->o, 0, sizeof *r->o); /* its heap parts are the table's now */
		r->o->fd = o->fd;
		r->o->kind = o->kind;
		o->fd = g->num[i];
		o->peer = o->kind == SNAP_OBJ_UNIX && g->peer[i] != SIZE_MAX ? g->num[g->peer[i]] : 0;
		o->owner = o->kind == SNAP_OBJ_EPOLL ? (uint32_t)r->k : 0;
		if (o->kind == SNAP_OBJ_TIMERFD)
			expected_timer(expect, o);
	}
	for (size_t i = 0; i < g->n; i++) {
		const struct kref *r = &g->r[i];
		for (size_t j = 0; g->tree[r->g] && j < r->p->nfds; j++) {
			struct snap_fd *f = &r->p->fds[j];
			if (f->kind == SNAP_FD_OBJECT && f->size == r->o->fd) {
				f->kind = SNAP_FD_SHARED;
				f->size = g->num[r->g];
			}
		}
	}
	for (size_t k = 0; k <= root->nprocs; k++) {
		struct snap_state *p = proc_of(root, k);
		size_t kept = 0;
		for (size_t i = 0; i < p->nobjects; i++) {
			int shared = 0;
			for (size_t j = 0; j < p->nfds && !shared; j++)
				shared = p->fds[j].kind == SNAP_FD_SHARED && p->fds[j].fd == p->objects[i].fd;
			if (shared)
				snap_object_clear(&p->objects[i]);
			else
				p->objects[kept++] = p->objects[i];
		}
		p->nobjects = kept;
	}
	return 0;
}

int snap_kobjs_capture(struct snap_state *root, const pid_t *hosts,
		       const struct snap_state *expect, struct common_err *e)
{
	struct kgroups g;
	memset(&g, 0, sizeof g);
	group_refs(root, hosts, &g);
	int rc = tie_ends(&g, e) < 0 || epoll_owners(&g, e) < 0 ? -1 : build_table(root, &g, expect, e);
	free(g.r);
	free(g.tree);
	free(g.rep);
	free(g.peer);
	free(g.num);
	return rc;
}

void snap_kobjs_put(struct codec_buf *b, const struct snap_state *root)
{
	codec_put_u32(b, (uint32_t)root->nkobjs);
	for (size_t i = 0; i < root->nkobjs; i++) {
		snap_object_put(b, &root->kobjs[i]);
		if (root->kobjs[i].kind == SNAP_OBJ_EPOLL)
			codec_put_u32(b, root->kobjs[i].owner);
	}
}

/* Whether process p holds shared object number num; has descriptor fd open. */
static int holds_object(const struct snap_state *p, uint32_t num)
{
	for (size_t i = 0; i < p->nfds; i++)
		if (p->fds[i].kind == SNAP_FD_SHARED && p->fds[i].size == num)
			return 1;
	return 0;
}

static int has_fd(const struct snap_state *p, uint32_t fd)
{
	for (size_t i = 0; i < p->nfds; i++)
		if (p->fds[i].fd == fd)
			return 1;
	return 0;
}

/* Every shared descriptor names an object, every object has one; pairs name
 * each other, a slave has its master, an epoll set's owner holds it and every
 * descriptor its watches name. */
static int check_kobjs(struct codec_rd *r, const struct snap_state *root)
{
	uint8_t *used = common_xcalloc(root->nkobjs + 1, 1);
	int bad = 0;
	for (size_t k = 0; k <= root->nprocs && !bad; k++) {
		const struct snap_state *p = proc_of((struct snap_state *)root, k);
		for (size_t i = 0; i < p->nfds && !bad; i++)
			if (p->fds[i].kind == SNAP_FD_SHARED) {
				bad = !p->fds[i].size || p->fds[i].size > root->nkobjs;
				used[bad ? 0 : p->fds[i].size] = 1;
			}
	}
	for (size_t j = 0; j < root->nkobjs && !bad; j++)
		bad = !used[j + 1];
	free(used);
	if (bad)
		return codec_rd_fail(r, "shared descriptor names no object, or an object no descriptor");
	for (size_t j = 0; j < root->nkobjs; j++) {
		const struct snap_object *o = &root->kobjs[j], *p;
		if (o->kind == SNAP_OBJ_UNIX && o->state == SNAP_SOCK_PAIRED &&
		    (o->peer == o->fd || o->peer > root->nkobjs || (p = &root->kobjs[o->peer - 1])->kind !=
		     SNAP_OBJ_UNIX || p->state != SNAP_SOCK_PAIRED || p->peer != o->fd || p->type != o->type))
			return codec_rd_fail(r, "shared socket pair ends do not name each other");
		int master = o->kind != SNAP_OBJ_PTY_SLAVE;
		for (size_t i = 0; !master && i < root->nkobjs; i++)
			master = root->kobjs[i].kind == SNAP_OBJ_PTY_MASTER &&
				 root->kobjs[i].index == o->index;
		if (!master)
			return codec_rd_fail(r, "shared pty slave without its master");
		if (o->kind != SNAP_OBJ_EPOLL)
			continue;
		const struct snap_state *w = proc_of((struct snap_state *)root, o->owner);
		if (!holds_object(w, o->fd))
			return codec_rd_fail(r, "shared epoll set's owner does not hold it");
		for (size_t i = 0; i < o->nwatch; i++)
			if (!has_fd(w, o->watch[i].fd))
				return codec_rd_fail(r, "shared epoll watch of a descriptor its owner "
						     "has not open");
	}
	return 0;
}

int snap_kobjs_get(struct codec_rd *r, struct snap_state *root)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n > SNAP_OBJ_MAX || (uint64_t)n * 8 > r->len - r->off)
		return codec_rd_fail(r, "shared object count out of range");
	root->kobjs = common_xcalloc(n ? n : 1, sizeof *root->kobjs);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_object *o = &root->kobjs[i];
		if (codec_get_u32(r, &o->kind) < 0 || codec_get_u32(r, &o->fd) < 0)
			return -1;
		root->nkobjs = i + 1;
		if (o->kind > SNAP_OBJ_PTY_SLAVE || o->fd != i + 1)
			return codec_rd_fail(r, "shared object kind unknown or not numbered in order");
		if (snap_object_get(r, o) < 0 ||
		    (o->kind == SNAP_OBJ_EPOLL && codec_get_u32(r, &o->owner) < 0))
			return -1;
		if (o->owner > root->nprocs || (o->owner && root->procs[o->owner - 1].zombie))
			return codec_rd_fail(r, "shared epoll set's owner is no live process");
	}
	return check_kobjs(r, root);
}

void snap_kobjs_free(struct snap_state *root)
{
	for (size_t i = 0; i < root->nkobjs; i++)
		snap_object_clear(&root->kobjs[i]);
	free(root->kobjs);
	root->kobjs = NULL;
	root->nkobjs = 0;
}

int snap_kobjs_holders(struct trace_tracee *root, uint64_t scratch, const struct snap_state *st,
		       struct snap_hosts *h, struct common_err *e)
{
	h->kobj_fd = h->shm_fd + (uint32_t)st->nshms;
	if (!st->nkobjs)
		return 0;
	/* the table as a process's objects at the holders, epoll sets empty:
	 * made by the code that makes a process's own */
	struct snap_state held;
	memset(&held, 0, sizeof held);
	held.version = st->version;
	held.objects = common_xcalloc(st->nkobjs, sizeof *held.objects);
	held.nobjects = st->nkobjs;
	for (size_t i = 0; i < st->nkobjs; i++) {
		struct snap_object *o = &held.objects[i];
		*o = st->kobjs[i];
		o->fd = h->kobj_fd + (uint32_t)i;
		o->peer = o->peer ? h->kobj_fd + o->peer - 1 : 0;
		o->nwatch = 0;
	}
	int rc = snap_objects_restore(root, scratch, &held, e);
	free(held.objects);
	return rc;
}

int snap_kobjs_watch(struct trace_tracee *t, uint64_t scratch, const struct snap_state *p,
		     const struct snap_state *root, size_t k, struct common_err *e)
{
	for (size_t j = 0; j < root->nkobjs; j++) {
		const struct snap_object *o = &root->kobjs[j];
		if (o->kind != SNAP_OBJ_EPOLL || o->owner != k)
			continue;
		size_t at = 0;
		while (at < p->nfds && (p->fds[at].kind != SNAP_FD_SHARED || p->fds[at].size != o->fd))
			at++;
		for (size_t i = 0; at < p->nfds && i < o->nwatch; i++) {
			uint8_t ev[12]; /* struct epoll_event, packed */
			memcpy(ev, &o->watch[i].events, 4);
			memcpy(ev + 4, &o->watch[i].data, 8);
			if (trace_tracee_write(t, scratch, ev, sizeof ev, e) < 0 ||
			    snap_inject(t, "epoll_ctl of a shared set", SYS_epoll_ctl, p->fds[at].fd,
					1 /* EPOLL_CTL_ADD */, o->watch[i].fd, scratch, NULL, e) < 0)
				return -1;
		}
	}
	return 0;
}
