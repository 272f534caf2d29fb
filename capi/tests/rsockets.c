/* rsockets in one process, both ends on the first device's port: the errno of each misuse
 * (ENOTSUP for what rsocket() does not make, EBADF, ENOTCONN, EAGAIN, EINPROGRESS, EINVAL,
 * ECONNREFUSED, ECONNRESET, ENOMEM), the options (SO_RCVBUF doubled, SOL_RDMA only before
 * connecting), a non-blocking connect finished through rpoll, data both ways (MSG_PEEK,
 * rselect), the end of the stream after rshutdown(SHUT_WR), riomap/riowrite, and 1 MiB
 * both ways at once through 4 receives a side. */
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <netinet/tcp.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include "common.h"

#define ERRNO_IS(call, want, what) do { errno = 0; long long _r = (long long)(call); \
	CHECK(_r == -1 && errno == (want), "%s: returned %lld, errno %d (%s), expected -1 with %d", \
	      what, _r, errno, strerror(errno), want); } while (0)

/* rpoll one fd for `events`, 15 s at most (a loaded machine, and a CM QP's RNR timer of
 * 655 ms, stretch a handshake or a message well past a second): its revents. */
#define wait_for(fd, events) wait_for_at(fd, events, __LINE__)
static short wait_for_at(int fd, short events, int line)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n = rpoll(&p, 1, 15000);
	CHECK(n == 1, "rpoll within 15 s for the wait at line %d: got %d", line, n);
	return p.revents;
}

/* Wait for the listener's request while a non-blocking connect of `c` is under way. As in
 * rsocket.c, such a connect moves on (address, route, REQ) only in calls on its own socket,
 * so the rpoll takes both: waiting on the listener alone leaves the REQ unsent whenever the
 * address was not resolved within rconnect. */
#define wait_for_request(lfd, c) wait_for_request_at(lfd, c, __LINE__)
static void wait_for_request_at(int lfd, int c, int line)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p[2] = { { .fd = lfd, .events = POLLIN }, { .fd = c, .events = POLLOUT } };
		CHECK(rpoll(p, 2, 100) >= 0, "rpoll: %s", strerror(errno));
		if (p[0].revents & POLLIN)
			return;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		CHECK(t1.tv_sec - t0.tv_sec < 15, "a request within 15 s for the wait at line %d", line);
	}
}

static int opt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	CHECK_EQ(rgetsockopt(fd, level, name, &v, &len), 0, "rgetsockopt");
	CHECK_EQ(len, sizeof(int), "its length");
	return v;
}

int main(void)
{
	ERRNO_IS(rsocket(AF_UNIX, SOCK_STREAM, 0), ENOTSUP, "rsocket(AF_UNIX)");
	ERRNO_IS(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), ENOTSUP, "rsocket(SOCK_STREAM, IPPROTO_UDP)");
	ERRNO_IS(rsocket(AF_INET, SOCK_RAW, 0), ENOTSUP, "rsocket(SOCK_RAW)");
	int lfd = rsocket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		SKIP("rsocket: %s (no RDMA CM here)", strerror(errno));

	struct sockaddr_in addr = first_ipv4();

	char buf[4096] = { 0 };
	ERRNO_IS(rsend(987654, "x", 1, 0), EBADF, "rsend on no rsocket");
	ERRNO_IS(rclose(987654), EBADF, "rclose of no rsocket");
	ERRNO_IS(rsend(lfd, "x", 1, 0), ENOTCONN, "rsend before a connection");
	ERRNO_IS(rsendto(lfd, "x", 1, 0, (struct sockaddr *)&addr, sizeof(addr)), EISCONN,
		 "rsendto with an address on a stream socket");
	ERRNO_IS(rrecv(lfd, buf, 1, 0), ENOTCONN, "rrecv before a connection");
	ERRNO_IS(raccept(lfd, NULL, NULL), EBADF, "raccept on a socket that does not listen");
	ERRNO_IS(riomap(lfd, buf, sizeof(buf), PROT_WRITE, 0, -1), EINVAL, "riomap before a connection");
	ERRNO_IS(rshutdown(lfd, 7), EINVAL, "rshutdown with another `how`");
	CHECK_EQ(rshutdown(lfd, SHUT_RDWR), 0, "rshutdown of a socket not connected");

	/* Options: unknown ones are ENOTSUP; buffer sizes doubled as Linux does. */
	int v = 1;
	ERRNO_IS(rsetsockopt(lfd, SOL_SOCKET, SO_BROADCAST, &v, sizeof(v)), ENOTSUP, "rsetsockopt SO_BROADCAST");
	ERRNO_IS(rsetsockopt(lfd, 12345, 1, &v, sizeof(v)), ENOTSUP, "rsetsockopt of an unknown level");
	ERRNO_IS(rsetsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &v, 1), EINVAL, "rsetsockopt with a short value");
	CHECK_EQ(rsetsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v)), 0, "SO_REUSEADDR");
	CHECK_EQ(opt(lfd, SOL_SOCKET, SO_REUSEADDR), 1, "SO_REUSEADDR read back");
	CHECK_EQ(rsetsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)), 0, "TCP_NODELAY");
	CHECK_EQ(opt(lfd, IPPROTO_TCP, TCP_NODELAY), 1, "TCP_NODELAY read back");
	v = 1 << 16;
	CHECK_EQ(rsetsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0, "SO_RCVBUF");
	CHECK_EQ(opt(lfd, SOL_SOCKET, SO_RCVBUF), 1 << 17, "SO_RCVBUF doubled");
	v = 16;
	CHECK_EQ(rsetsockopt(lfd, SOL_RDMA, RDMA_RQSIZE, &v, sizeof(v)), 0, "RDMA_RQSIZE before connecting");
	CHECK_EQ(opt(lfd, SOL_RDMA, RDMA_RQSIZE), 16, "RDMA_RQSIZE read back");
	v = 1;
	CHECK_EQ(rsetsockopt(lfd, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof(v)), 0, "RDMA_IOMAPSIZE");
	ERRNO_IS(rsetsockopt(lfd, SOL_RDMA, 99, &v, sizeof(v)), ENOTSUP, "an unknown SOL_RDMA option");
	ERRNO_IS(rfcntl(lfd, F_DUPFD, 0), ENOTSUP, "rfcntl(F_DUPFD)");

	CHECK_EQ(rbind(lfd, (struct sockaddr *)&addr, sizeof(addr)), 0, "rbind");
	struct sockaddr_in got;
	socklen_t len = sizeof(got);
	CHECK_EQ(rgetsockname(lfd, (struct sockaddr *)&got, &len), 0, "rgetsockname");
	CHECK(got.sin_port != 0 && got.sin_addr.s_addr == addr.sin_addr.s_addr, "the bound address and a port");
	addr.sin_port = got.sin_port;
	CHECK_EQ(rlisten(lfd, 4), 0, "rlisten");
	CHECK_EQ(rfcntl(lfd, F_SETFL, O_NONBLOCK), 0, "O_NONBLOCK");
	CHECK(rfcntl(lfd, F_GETFL) & O_NONBLOCK, "F_GETFL shows O_NONBLOCK");
	ERRNO_IS(raccept(lfd, NULL, NULL), EAGAIN, "raccept with no request on a non-blocking listener");

	/* A port nobody listens on: ECONNREFUSED (the peer's CM rejects the REQ). */
	int c = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0, "rsocket");
	struct sockaddr_in closed = addr;
	closed.sin_port = htons(ntohs(addr.sin_port) + 1);
	ERRNO_IS(rconnect(c, (struct sockaddr *)&closed, sizeof(closed)), ECONNREFUSED, "rconnect to no listener");
	ERRNO_IS(rconnect(c, (struct sockaddr *)&addr, sizeof(addr)), ENOTCONN, "rconnect after a refused one");
	CHECK_EQ(rclose(c), 0, "rclose");

	/* A non-blocking connect: EINPROGRESS, then POLLOUT and SO_ERROR 0. */
	c = rsocket(AF_INET, SOCK_STREAM, 0);
	v = 1;
	CHECK_EQ(rsetsockopt(c, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof(v)), 0, "RDMA_IOMAPSIZE");
	CHECK_EQ(rfcntl(c, F_SETFL, O_NONBLOCK), 0, "O_NONBLOCK");
	ERRNO_IS(rconnect(c, (struct sockaddr *)&addr, sizeof(addr)), EINPROGRESS, "a non-blocking rconnect");
	wait_for_request(lfd, c);
	struct sockaddr_in peer;
	len = sizeof(peer);
	int s = raccept(lfd, (struct sockaddr *)&peer, &len);
	CHECK(s >= 0, "raccept: %s", strerror(errno));
	CHECK(peer.sin_addr.s_addr == addr.sin_addr.s_addr, "raccept gives the peer's address");
	CHECK(rfcntl(s, F_GETFL) & O_NONBLOCK, "the accepted socket inherits O_NONBLOCK");
	CHECK(wait_for(c, POLLOUT) & POLLOUT, "POLLOUT once connected");
	CHECK_EQ(opt(c, SOL_SOCKET, SO_ERROR), 0, "SO_ERROR after connecting");
	CHECK_EQ(rconnect(c, (struct sockaddr *)&addr, sizeof(addr)), 0, "rconnect on a connected socket");
	v = 8;
	ERRNO_IS(rsetsockopt(c, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)), EINVAL, "SOL_RDMA once connected");
	len = sizeof(got);
	CHECK_EQ(rgetpeername(c, (struct sockaddr *)&got, &len), 0, "rgetpeername");
	CHECK(got.sin_port == addr.sin_port, "the peer's port");

	/* Data: EAGAIN before, then the bytes (MSG_PEEK leaves them). */
	ERRNO_IS(rrecv(s, buf, sizeof(buf), 0), EAGAIN, "rrecv with nothing on a non-blocking socket");
	char msg[3000];
	for (int i = 0; i < (int)sizeof(msg); i++)
		msg[i] = (char)(i * 7);
	CHECK_EQ(rsend(c, msg, sizeof(msg), 0), sizeof(msg), "rsend");
	CHECK(wait_for(s, POLLIN) & POLLIN, "POLLIN with data");
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	struct timeval tv = { .tv_sec = 5 };
	CHECK_EQ(rselect(s + 1, &rd, NULL, NULL, &tv), 1, "rselect: the socket readable");
	CHECK(FD_ISSET(s, &rd), "its bit");
	CHECK_EQ(rrecv(s, buf, 10, MSG_PEEK), 10, "rrecv MSG_PEEK");
	CHECK(!memcmp(buf, msg, 10), "the peeked bytes");
	size_t got_bytes = 0;
	while (got_bytes < sizeof(msg)) {
		ssize_t r = rrecv(s, buf + got_bytes, sizeof(buf) - got_bytes, 0);
		if (r < 0) {
			CHECK(errno == EAGAIN, "rrecv: %s", strerror(errno));
			wait_for(s, POLLIN);
			continue;
		}
		got_bytes += r;
	}
	CHECK_EQ(got_bytes, sizeof(msg), "all the bytes");
	CHECK(!memcmp(buf, msg, sizeof(msg)), "the bytes as sent");

	/* riomap: PROT_READ is EINVAL, a second map past RDMA_IOMAPSIZE 1 ENOMEM; riowrite lands
	 * in the mapped buffer, and the message after it finds it there. */
	static char target[8192], other[64];
	ERRNO_IS(riomap(s, target, sizeof(target), PROT_READ, 0, -1), EINVAL, "riomap PROT_READ");
	CHECK_EQ(riomap(s, target, sizeof(target), PROT_WRITE, 0, 4096), 4096, "riomap at offset 4096");
	ERRNO_IS(riomap(s, other, sizeof(other), PROT_WRITE, 0, -1), ENOMEM, "a second map past RDMA_IOMAPSIZE");
	ERRNO_IS(riounmap(s, other, sizeof(other)), EINVAL, "riounmap of no map");
	CHECK_EQ(rsend(s, "m", 1, 0), 1, "a message after the map");
	wait_for(c, POLLIN);
	CHECK_EQ(rrecv(c, buf, 1, 0), 1, "the message (the map came before it)");
	CHECK_EQ(riowrite(c, msg, 100, 0, 0), 0, "riowrite where the peer maps nothing: 0 bytes");
	CHECK_EQ(riowrite(c, msg, 1000, 4096 + 16, 0), 1000, "riowrite into the map");
	CHECK_EQ(rsend(c, "n", 1, 0), 1, "a message after the riowrite");
	wait_for(s, POLLIN);
	CHECK_EQ(rrecv(s, buf, 1, 0), 1, "the message");
	CHECK(!memcmp(target + 16, msg, 1000), "the riowrite's bytes in the mapped buffer");
	CHECK_EQ(riounmap(s, target, sizeof(target)), 0, "riounmap");

	/* rshutdown(SHUT_WR): the peer reads the end of the stream after the data; this side
	 * still reads, and may no longer write (ECONNRESET, as rsocket.c). */
	CHECK_EQ(rsend(c, "last", 4, 0), 4, "rsend before the shutdown");
	CHECK_EQ(rshutdown(c, SHUT_WR), 0, "rshutdown(SHUT_WR)");
	ERRNO_IS(rsend(c, "x", 1, 0), ECONNRESET, "rsend after SHUT_WR");
	CHECK_EQ(rfcntl(s, F_SETFL, 0), 0, "the accepted socket blocking");
	CHECK_EQ(rrecv(s, buf, sizeof(buf), MSG_WAITALL), 4, "the data before the end (MSG_WAITALL stops at the end)");
	CHECK_EQ(rrecv(s, buf, sizeof(buf), 0), 0, "then the end of the stream");
	CHECK_EQ(rsend(s, "back", 4, 0), 4, "the other way still writes");
	CHECK(wait_for(c, POLLIN) & POLLIN, "POLLIN");
	CHECK_EQ(rrecv(c, buf, 4, 0), 4, "and the shut side reads");

	CHECK_EQ(rclose(s), 0, "rclose");
	ERRNO_IS(rsend(s, "x", 1, 0), EBADF, "rsend on a closed rsocket");
	/* The peer closed: the end of the stream, then writes fail. */
	CHECK(wait_for(c, POLLIN) & (POLLIN | POLLHUP), "POLLIN or POLLHUP after the peer's close");
	CHECK_EQ(rrecv(c, buf, sizeof(buf), 0), 0, "rrecv after the peer's close: the end of the stream");
	CHECK_EQ(rclose(c), 0, "rclose");

	/* Both ways at once with 4 receives a side: each fills the other, and the credits the
	 * readers return keep both streams going (no deadlock), every byte in order. */
	v = 4;
	c = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK_EQ(rsetsockopt(c, SOL_RDMA, RDMA_RQSIZE, &v, sizeof(v)), 0, "RDMA_RQSIZE 4");
	CHECK_EQ(rsetsockopt(lfd, SOL_RDMA, RDMA_RQSIZE, &v, sizeof(v)), 0, "RDMA_RQSIZE 4 on the listener");
	CHECK_EQ(rfcntl(c, F_SETFL, O_NONBLOCK), 0, "O_NONBLOCK");
	ERRNO_IS(rconnect(c, (struct sockaddr *)&addr, sizeof(addr)), EINPROGRESS, "rconnect");
	wait_for_request(lfd, c);
	s = raccept(lfd, NULL, NULL);
	CHECK(s >= 0, "raccept: %s", strerror(errno));
	CHECK_EQ(opt(s, SOL_RDMA, RDMA_RQSIZE), 4, "the accepted socket has the listener's RDMA_RQSIZE");
	CHECK(wait_for(c, POLLOUT) & POLLOUT, "connected");
	enum { TOTAL = 1 << 20 };
	static unsigned char out[2][TOTAL], in[2][TOTAL];
	for (int i = 0; i < TOTAL; i++) {
		out[0][i] = (unsigned char)(i * 13 + 1);
		out[1][i] = (unsigned char)(i * 29 + 7);
	}
	int fds[2] = { c, s };
	size_t sent[2] = { 0, 0 }, rcvd[2] = { 0, 0 };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (rcvd[0] < TOTAL || rcvd[1] < TOTAL) {
		for (int k = 0; k < 2; k++) {
			if (sent[k] < TOTAL) {
				ssize_t r = rsend(fds[k], out[k] + sent[k], TOTAL - sent[k], MSG_DONTWAIT);
				CHECK(r > 0 || errno == EAGAIN, "rsend both ways: %s", strerror(errno));
				sent[k] += r > 0 ? r : 0;
			}
			if (rcvd[k] < TOTAL) {
				ssize_t r = rrecv(fds[k], in[k] + rcvd[k], TOTAL - rcvd[k], MSG_DONTWAIT);
				CHECK(r > 0 || errno == EAGAIN, "rrecv both ways: %s", strerror(errno));
				rcvd[k] += r > 0 ? r : 0;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		CHECK(t1.tv_sec - t0.tv_sec < 60, "both ways: %zu/%zu and %zu/%zu bytes after 60 s", rcvd[0], sent[1],
		      rcvd[1], sent[0]);
	}
	CHECK(!memcmp(in[0], out[1], TOTAL) && !memcmp(in[1], out[0], TOTAL), "every byte both ways, in order");
	CHECK_EQ(rclose(c), 0, "rclose");
	CHECK_EQ(rclose(s), 0, "rclose");
	CHECK_EQ(rclose(lfd), 0, "rclose of the listener");
	printf("rsockets: errnos, options, connect, data, riowrite and shutdown as rsocket.c\n");
	return 0;
}
