/* snap: a kernel object several processes of the tree hold (a socket pair
 * with bytes queued both ways, an eventfd, an epoll set) is read from the
 * guest once, at its first holder, and the tree's table made from that is
 * byte for byte the one reading it at every holder made: images unchanged. */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "codec/codec.h"
#include "snap/snap-internal.h"
#include "unit.h"

#define QUEUED 3000u
#define BACK 100u

struct counts { uint64_t objects, bytes; };

/* The objects at fds (ascending) of process k of root, host pids hosts; tree
 * 0: each read from its holder, as before. */
static void capture(struct snap_state *root, size_t k, const pid_t *hosts, const int *fds, size_t n,
		    int tree, struct counts *got)
{
	struct snap_state *p = k ? &root->procs[k - 1] : root;
	struct snap_fdctx c;
	struct common_err e = { "", "" };
	snap_fdctx_init(&c, hosts[k]);
	c.tree = tree ? root : NULL;
	c.hosts = hosts;
	c.k = k;
	p->version = SNAP_VERSION;
	p->fds = common_xcalloc(n, sizeof *p->fds);
	for (size_t i = 0; i < n; i++) {
		char path[64], link[256];
		struct stat sb;
		struct snap_fd *f = &p->fds[p->nfds++];
		snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)hosts[k], fds[i]);
		ssize_t l = readlink(path, link, sizeof link - 1);
		CHECK(l > 0 && stat(path, &sb) == 0);
		link[l > 0 ? l : 0] = 0;
		f->fd = (uint32_t)fds[i];
		f->kind = SNAP_FD_OBJECT;
		f->path = common_xstrdup("");
		if (snap_fd_object(&c, f, link, &sb, p, &e) < 0)
			fprintf(stderr, "fd %d: %s: %s\n", fds[i], e.what, e.why);
	}
	CHECK(snap_objects_link(p, &e) == 0);
	got->objects += c.objects_read;
	got->bytes += c.bytes_read;
	snap_fdctx_close(&c);
}

/* The tree of this process and its child, captured; its table's encoding into b. */
static void tree_table(const pid_t *hosts, const int *fds, size_t n, int tree, struct counts *got,
		       struct codec_buf *b)
{
	struct snap_state root;
	struct common_err e = { "", "" };
	memset(&root, 0, sizeof root);
	root.version = SNAP_VERSION;
	root.procs = common_xcalloc(1, sizeof *root.procs);
	root.nprocs = 1;
	root.procs[0].pid = 2;
	root.procs[0].ppid = 1;
	memset(got, 0, sizeof *got);
	for (size_t k = 0; k < 2; k++)
		capture(&root, k, hosts, fds, n, tree, got);
	CHECK(snap_kobjs_capture(&root, hosts, NULL, &e) == 0);
	CHECK(root.nkobjs == 4 && root.nobjects == 0 && root.procs[0].nobjects == 0);
	snap_kobjs_put(b, &root);
	for (size_t k = 0; k < 2; k++) { /* every holder's descriptors name the table */
		const struct snap_state *p = k ? &root.procs[0] : &root;
		for (size_t i = 0; i < p->nfds; i++)
			codec_put_u64(b, p->fds[i].kind == SNAP_FD_SHARED ? p->fds[i].size : 99);
	}
	snap_state_free(&root);
}

/* A guest's tree in a user and network namespace of its own (where sock_diag
 * finds its sockets): a root holding the objects, a child holding them too.
 * The pids and descriptors (ascending) come back through out. */
static void guest_tree(int out)
{
	int sv[2], fds[4];
	char buf[QUEUED];
	memset(buf, 'q', sizeof buf);
	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 ||
	    write(sv[1], buf, QUEUED) != QUEUED || write(sv[0], buf, BACK) != BACK)
		_exit(1);
	int ev = eventfd(5, 0), ep = epoll_create1(0);
	struct epoll_event a = { .events = EPOLLIN, .data.u64 = 7 }, b = { .events = EPOLLIN, .data.u64 = 9 };
	if (ev < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &a) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, ev, &b) < 0)
		_exit(1);
	fds[0] = sv[0], fds[1] = sv[1], fds[2] = ev, fds[3] = ep;
	pid_t kid = fork();
	if (kid == 0)
		for (;;)
			pause();
	if (kid < 0 || write(out, &kid, sizeof kid) != sizeof kid || write(out, fds, sizeof fds) != sizeof fds)
		_exit(1);
	for (;;)
		pause();
}

int main(void)
{
	int pp[2], fds[4];
	pid_t kid = -1;
	CHECK(pipe(pp) == 0);
	pid_t root = fork();
	if (root == 0)
		guest_tree(pp[1]);
	CHECK(root > 0 && read(pp[0], &kid, sizeof kid) == sizeof kid &&
	      read(pp[0], fds, sizeof fds) == sizeof fds);
	pid_t hosts[2] = { root, kid };
	struct counts once, each;
	struct codec_buf t1, t2;
	codec_buf_init(&t1);
	codec_buf_init(&t2);
	tree_table(hosts, fds, 4, 1, &once, &t1);
	tree_table(hosts, fds, 4, 0, &each, &t2);
	/* read once: four objects, the queued bytes of each direction once */
	CHECK(once.objects == 4 && once.bytes == QUEUED + BACK);
	CHECK(each.objects == 8 && each.bytes == 2 * (QUEUED + BACK));
	if (once.objects != 4 || each.objects != 8)
		fprintf(stderr, "read %llu objects, %llu bytes (each: %llu, %llu)\n", (unsigned long long)once.objects,
			(unsigned long long)once.bytes, (unsigned long long)each.objects, (unsigned long long)each.bytes);
	CHECK(t1.len > QUEUED + BACK && t1.len == t2.len && !memcmp(t1.p, t2.p, t1.len));
	codec_buf_free(&t1);
	codec_buf_free(&t2);
	if (kid > 0)
		kill(kid, SIGKILL);
	kill(root, SIGKILL);
	waitpid(root, NULL, 0);
	return unit_finish("test_snap_kobj");
}
