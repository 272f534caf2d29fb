/* Datagram rsockets in one process, both sockets on the first device's address: the errno
 * of each misuse (EINVAL before a bind, EDESTADDRREQ with no destination, EFAULT, EMSGSIZE
 * past what one message carries, EOPNOTSUPP for the stream-only calls, EBADF after
 * rclose), rsendto/rrecvfrom both ways with the data and each source address checked (the
 * first message through the UDP socket, the rest on the UD QPs), MSG_PEEK, a datagram cut
 * to a short buffer, rpoll's POLLIN and POLLOUT, a "connected" socket's rsend/rrecv,
 * rsendmsg/rrecvmsg, the options, a burst of 200 datagrams, and rclose of a socket another
 * thread waits on (EBADF there). */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include "common.h"

#define ERRNO_IS(call, want, what) do { errno = 0; long long _r = (long long)(call); \
	CHECK(_r == -1 && errno == (want), "%s: returned %lld, errno %d (%s), expected -1 with %d", \
	      what, _r, errno, strerror(errno), want); } while (0)

/* rpoll one fd for `events`, 15 s at most: its revents. */
static short wait_for(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n = rpoll(&p, 1, 15000);
	CHECK(n == 1, "rpoll within 15 s: got %d (%s)", n, strerror(errno));
	return p.revents;
}

static struct sockaddr_in name_of(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	CHECK_EQ(rgetsockname(fd, (struct sockaddr *)&a, &len), 0, "rgetsockname");
	CHECK_EQ(len, sizeof(a), "rgetsockname's length");
	return a;
}

/* Receive one datagram on `fd` (waiting with rpoll) and check its bytes and source. */
static void expect(int fd, const char *want, size_t len, const struct sockaddr_in *from, const char *what)
{
	char buf[4096];
	struct sockaddr_in src;
	socklen_t slen = sizeof(src);
	CHECK(wait_for(fd, POLLIN) & POLLIN, "%s: POLLIN", what);
	memset(&src, 0, sizeof(src));
	ssize_t n = rrecvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&src, &slen);
	CHECK(n == (ssize_t)len, "%s: rrecvfrom gave %zd bytes (%s), expected %zu", what, n, strerror(errno), len);
	CHECK(memcmp(buf, want, len) == 0, "%s: the bytes differ", what);
	CHECK_EQ(slen, sizeof(src), "the source's length");
	CHECK(src.sin_family == AF_INET && src.sin_port == from->sin_port &&
	      src.sin_addr.s_addr == from->sin_addr.s_addr,
	      "%s: source %08x:%u, expected %08x:%u", what, ntohl(src.sin_addr.s_addr), ntohs(src.sin_port),
	      ntohl(from->sin_addr.s_addr), ntohs(from->sin_port));
}

/* A blocking rrecv in another thread: its result and errno. */
struct blocked { int fd; long r; int err; };
static void *recv_blocked(void *arg)
{
	struct blocked *b = arg;
	char buf[64];
	errno = 0;
	b->r = rrecv(b->fd, buf, sizeof(buf), 0);
	b->err = errno;
	return NULL;
}

static int opt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	CHECK_EQ(rgetsockopt(fd, level, name, &v, &len), 0, "rgetsockopt");
	return v;
}

int main(void)
{
	int ndev = 0;
	struct ibv_context **devs = rdma_get_devices(&ndev);
	if (!devs || ndev == 0)
		SKIP("no RDMA device (rdma_get_devices)");
	rdma_free_devices(devs);
	struct sockaddr_in addr = first_ipv4();

	ERRNO_IS(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP), ENOTSUP, "rsocket(SOCK_DGRAM, IPPROTO_TCP)");
	int a = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(a >= 0, "rsocket(AF_INET, SOCK_DGRAM, 0): %s", strerror(errno));
	int b = rsocket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
	CHECK(b >= 0, "rsocket(AF_INET, SOCK_DGRAM, IPPROTO_UDP): %s", strerror(errno));

	/* Misuse before a bind: no state to read, no destination to send to. */
	char buf[4096] = { 0 };
	ERRNO_IS(rrecv(a, buf, sizeof(buf), MSG_DONTWAIT), EINVAL, "rrecv before a bind");
	ERRNO_IS(rrecvfrom(a, buf, sizeof(buf), 0, NULL, NULL), EINVAL, "rrecvfrom before a bind");
	ERRNO_IS(rsend(a, "x", 1, 0), EDESTADDRREQ, "rsend with no destination");
	ERRNO_IS(rlisten(a, 1), ENOTSUP, "rlisten on a datagram socket");
	ERRNO_IS(raccept(a, NULL, NULL), ENOTSUP, "raccept on a datagram socket");
	ERRNO_IS(riomap(a, buf, sizeof(buf), PROT_WRITE, 0, -1), ENOTSUP, "riomap on a datagram socket");
	CHECK_EQ(rshutdown(a, SHUT_RDWR), 0, "rshutdown of a datagram socket");
	ERRNO_IS(rshutdown(a, 7), EINVAL, "rshutdown with another `how`");
	CHECK_EQ(opt(a, SOL_SOCKET, SO_TYPE), SOCK_DGRAM, "SO_TYPE");
	CHECK_EQ(opt(a, SOL_RDMA, RDMA_SQSIZE), 384, "RDMA_SQSIZE's default");
	int v = 16;
	CHECK_EQ(rsetsockopt(a, SOL_RDMA, RDMA_RQSIZE, &v, sizeof(v)), 0, "RDMA_RQSIZE before a bind");
	v = 1 << 16;
	CHECK_EQ(rsetsockopt(a, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0, "SO_RCVBUF");
	CHECK_EQ(opt(a, SOL_SOCKET, SO_RCVBUF), 1 << 17, "SO_RCVBUF doubled");
	ERRNO_IS(rsetsockopt(a, IPPROTO_TCP, 1 /* TCP_NODELAY */, &v, sizeof(v)), ENOPROTOOPT,
		 "a TCP option on a datagram socket (the UDP socket's answer)");

	struct sockaddr_in any = addr;
	any.sin_port = 0;
	CHECK(rbind(a, (struct sockaddr *)&any, sizeof(any)) == 0, "rbind a: %s", strerror(errno));
	CHECK(rbind(b, (struct sockaddr *)&any, sizeof(any)) == 0, "rbind b: %s", strerror(errno));
	struct sockaddr_in an = name_of(a), bn = name_of(b);
	CHECK(an.sin_addr.s_addr == addr.sin_addr.s_addr && an.sin_port != 0, "a's address");
	ERRNO_IS(rsetsockopt(a, SOL_RDMA, RDMA_RQSIZE, &v, sizeof(v)), EINVAL, "RDMA_RQSIZE after a bind");
	/* Sized at the bind: 16 receives of 2048 bytes, the buffer fitted to them. */
	CHECK_EQ(opt(a, SOL_RDMA, RDMA_RQSIZE), 16, "RDMA_RQSIZE kept");
	CHECK_EQ(opt(a, SOL_SOCKET, SO_RCVBUF), 16 * 2048, "SO_RCVBUF fitted to the receives");
	CHECK(wait_for(a, POLLOUT) & POLLOUT, "POLLOUT once bound");
	ERRNO_IS(rrecv(a, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN, "rrecv with nothing there");
	struct pollfd p = { .fd = a, .events = POLLIN };
	CHECK_EQ(rpoll(&p, 1, 50), 0, "rpoll POLLIN with nothing there");

	ERRNO_IS(rsendto(a, NULL, 10, 0, (struct sockaddr *)&bn, sizeof(bn)), EFAULT, "rsendto from NULL");
	ERRNO_IS(rsendto(a, "x", 1, 0, (struct sockaddr *)&bn, 4), EINVAL, "rsendto with a short address");
	struct sockaddr_in6 six = { .sin6_family = AF_INET6 };
	ERRNO_IS(rsendto(a, "x", 1, 0, (struct sockaddr *)&six, sizeof(six)), EAFNOSUPPORT, "rsendto to IPv6");

	/* The first message goes through b's UDP socket and b's own QP; then both ways on the
	 * UD QPs. Each comes with its sender's address. */
	const char *m1 = "first datagram, through UDP";
	CHECK_EQ(rsendto(a, m1, strlen(m1), 0, (struct sockaddr *)&bn, sizeof(bn)), (ssize_t)strlen(m1), "rsendto a->b");
	expect(b, m1, strlen(m1), &an, "a->b first");
	const char *m2 = "an answer on the UD QPs";
	CHECK_EQ(rsendto(b, m2, strlen(m2), 0, (struct sockaddr *)&an, sizeof(an)), (ssize_t)strlen(m2), "rsendto b->a");
	expect(a, m2, strlen(m2), &bn, "b->a");
	for (int i = 0; i < 5; i++) {
		char m[64];
		int n = snprintf(m, sizeof(m), "message %d from a", i);
		CHECK(rsendto(a, m, n, 0, (struct sockaddr *)&bn, sizeof(bn)) == n, "rsendto a->b %d", i);
		expect(b, m, n, &an, "a->b");
	}

	/* The largest datagram and one byte more; a zero-length one. */
	char big[4096];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + 3);
	CHECK_EQ(rsendto(a, big, 2040, 0, (struct sockaddr *)&bn, sizeof(bn)), 2040, "2040 bytes");
	expect(b, big, 2040, &an, "2040 bytes");
	ERRNO_IS(rsendto(a, big, 2041, 0, (struct sockaddr *)&bn, sizeof(bn)), EMSGSIZE, "2041 bytes");
	ERRNO_IS(rsendto(a, big, 65536, 0, (struct sockaddr *)&bn, sizeof(bn)), EMSGSIZE, "64 KiB");
	ERRNO_IS(rsendto(a, big, (size_t)-1, 0, (struct sockaddr *)&bn, sizeof(bn)), EMSGSIZE, "SIZE_MAX bytes");
	CHECK_EQ(rsendto(a, big, 0, 0, (struct sockaddr *)&bn, sizeof(bn)), 0, "an empty datagram");
	expect(b, big, 0, &an, "an empty datagram");

	/* MSG_PEEK keeps it; a short buffer takes the datagram's head, the rest is gone. */
	CHECK_EQ(rsendto(a, "peekaboo", 8, 0, (struct sockaddr *)&bn, sizeof(bn)), 8, "rsendto peekaboo");
	CHECK(wait_for(b, POLLIN) & POLLIN, "POLLIN for peekaboo");
	CHECK_EQ(rrecv(b, buf, sizeof(buf), MSG_PEEK), 8, "MSG_PEEK");
	CHECK_EQ(rrecv(b, buf, 4, 0), 4, "a short buffer");
	CHECK(memcmp(buf, "peek", 4) == 0, "the datagram's head");
	ERRNO_IS(rrecv(b, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN, "nothing left of the cut datagram");

	/* A "connected" socket: rsend goes to the address rconnect gave, rgetpeername says it. */
	CHECK(rconnect(b, (struct sockaddr *)&an, sizeof(an)) == 0, "rconnect b to a: %s", strerror(errno));
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	CHECK_EQ(rgetpeername(b, (struct sockaddr *)&peer, &plen), 0, "rgetpeername");
	CHECK(peer.sin_port == an.sin_port, "rgetpeername gives a's port");
	CHECK_EQ(rsend(b, "connected", 9, 0), 9, "rsend on a connected datagram socket");
	expect(a, "connected", 9, &bn, "b->a rsend");
	CHECK_EQ(rwrite(b, "written", 7), 7, "rwrite");
	CHECK(wait_for(a, POLLIN) & POLLIN, "POLLIN for rwrite");
	CHECK_EQ(rread(a, buf, sizeof(buf)), 7, "rread");

	/* rsendmsg gathers one datagram; rrecvmsg scatters it and gives the source. */
	struct iovec out[2] = { { .iov_base = "gath", .iov_len = 4 }, { .iov_base = "ered", .iov_len = 4 } };
	struct msghdr mo = { .msg_name = &bn, .msg_namelen = sizeof(bn), .msg_iov = out, .msg_iovlen = 2 };
	CHECK_EQ(rsendmsg(a, &mo, 0), 8, "rsendmsg");
	char h1[3] = { 0 }, h2[16] = { 0 };
	struct iovec in[2] = { { .iov_base = h1, .iov_len = 3 }, { .iov_base = h2, .iov_len = sizeof(h2) } };
	struct sockaddr_in from;
	struct msghdr mi = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = in, .msg_iovlen = 2 };
	CHECK(wait_for(b, POLLIN) & POLLIN, "POLLIN for rsendmsg");
	CHECK_EQ(rrecvmsg(b, &mi, 0), 8, "rrecvmsg");
	CHECK(memcmp(h1, "gat", 3) == 0 && memcmp(h2, "hered", 5) == 0, "rrecvmsg scattered the datagram");
	CHECK(from.sin_port == an.sin_port, "rrecvmsg's source");

	/* A burst of 200 (more than a's 16 receives would hold unread: b waits on each). */
	for (int i = 0; i < 200; i++) {
		int k = (i * 37) % 1500 + 1;
		memset(buf, i, k);
		CHECK(rsendto(a, buf, k, 0, (struct sockaddr *)&bn, sizeof(bn)) == k, "burst %d: %s", i, strerror(errno));
		char got[2048];
		CHECK(wait_for(b, POLLIN) & POLLIN, "POLLIN in the burst");
		CHECK(rrecv(b, got, sizeof(got), 0) == k, "burst %d's length", i);
		CHECK(got[0] == (char)i && got[k - 1] == (char)i, "burst %d's bytes", i);
	}

	/* Misuse that must fail cleanly: vectors without buffers, a destination no simulated
	 * port reaches (the CM's address resolution fails; nothing is sent), rsend to it again. */
	ERRNO_IS(rsendmsg(a, NULL, 0), EINVAL, "rsendmsg of no message");
	struct iovec bad = { .iov_base = NULL, .iov_len = 5 };
	struct msghdr mb = { .msg_name = &bn, .msg_namelen = sizeof(bn), .msg_iov = &bad, .msg_iovlen = 1 };
	ERRNO_IS(rsendmsg(a, &mb, 0), EFAULT, "rsendmsg of a NULL buffer");
	ERRNO_IS(rwritev(a, NULL, 2), EINVAL, "rwritev of no vector");
	ERRNO_IS(rreadv(a, &bad, -1), EINVAL, "rreadv of a negative count");
	int c = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(c >= 0, "a third socket");
	struct sockaddr_in far = { .sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(0xc0000201) };
	ERRNO_IS(rsendto(c, "x", 1, 0, (struct sockaddr *)&far, sizeof(far)), ENETUNREACH,
		 "rsendto to 192.0.2.1 (no simulated port reaches it)");
	ERRNO_IS(rconnect(c, (struct sockaddr *)&far, sizeof(far)), ENETUNREACH, "rconnect to 192.0.2.1");
	ERRNO_IS(rsend(c, "x", 1, 0), EDESTADDRREQ, "rsend after the failed rconnect");
	CHECK_EQ(rclose(c), 0, "rclose c");

	/* rclose of a socket another thread waits on: that rrecv returns EBADF. */
	int d = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(d >= 0 && rbind(d, (struct sockaddr *)&any, sizeof(any)) == 0, "a fourth socket, bound");
	struct blocked bl = { .fd = d, .r = 0 };
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, recv_blocked, &bl), 0, "pthread_create");
	usleep(100 * 1000);
	CHECK_EQ(rclose(d), 0, "rclose d while a thread waits in rrecv");
	CHECK_EQ(pthread_join(t, NULL), 0, "pthread_join");
	CHECK(bl.r == -1 && bl.err == EBADF, "the waiting rrecv: %ld, errno %d, expected -1 with EBADF", bl.r, bl.err);

	/* A non-blocking socket answers EAGAIN with nothing there. */
	CHECK_EQ(rfcntl(a, F_SETFL, O_NONBLOCK), 0, "rfcntl O_NONBLOCK");
	CHECK_EQ(rfcntl(a, F_GETFL), O_NONBLOCK, "F_GETFL");
	ERRNO_IS(rrecv(a, buf, sizeof(buf), 0), EAGAIN, "rrecv on a non-blocking socket");

	CHECK_EQ(rclose(a), 0, "rclose a");
	CHECK_EQ(rclose(b), 0, "rclose b");
	ERRNO_IS(rsend(a, "x", 1, 0), EBADF, "rsend after rclose");
	printf("datagram rsockets: errnos, data and sources both ways, rpoll, 2040/2041 bytes, a burst of 200\n");
	return 0;
}
