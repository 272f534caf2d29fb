/* The floors the simulated network is measured against: what the OS gives two processes
 * over UDP on loopback addresses, with nothing simulated.
 *
 *   net_floor stream-recv ADDR PORT BYTES        receive until BYTES came (or 2 s of quiet);
 *                                                prints MB/s from the first datagram to the last
 *   net_floor stream-send ADDR PORT BYTES SIZE   send BYTES in SIZE-byte datagrams
 *   net_floor pp-server ADDR PORT N              echo N datagrams, busy-polling
 *   net_floor pp-client ADDR PORT N              N 2-byte round trips, busy-polling; prints the
 *                                                median half round trip in µs
 *   net_floor ack-server / ack-client ADDR PORT N  the same with a 1-byte acknowledgement of each
 *                                                2-byte message, which its sender waits for before
 *                                                it goes on (an RC SEND whose completion the
 *                                                program waits for, as ib_send_lat does)
 *   net_floor batch-server / batch-client ADDR PORT N  the same, the acknowledgement and the
 *                                                answer given to one sendmmsg and taken with
 *                                                recvmmsg (the least system calls the pattern needs)
 *
 * The sockets ask for 8 MiB buffers, as the simulated ports do. Addresses are in 127.0.0.0/8. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int sock(const char *addr, int port, int bind_it, struct sockaddr_in *peer)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	int size = 8 << 20;
	setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
	setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size));
	memset(peer, 0, sizeof(*peer));
	peer->sin_family = AF_INET;
	peer->sin_port = htons(port);
	if (inet_pton(AF_INET, addr, &peer->sin_addr) != 1 || (ntohl(peer->sin_addr.s_addr) >> 24) != 127) {
		fprintf(stderr, "%s: not an address in 127.0.0.0/8\n", addr);
		exit(2);
	}
	if (bind_it && bind(s, (struct sockaddr *)peer, sizeof(*peer)) != 0) {
		perror("bind");
		exit(2);
	}
	return s;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: see the comment at the top of net_floor.c\n");
		return 2;
	}
	const char *mode = argv[1], *addr = argv[2];
	int port = atoi(argv[3]);
	long long n = atoll(argv[4]);
	struct sockaddr_in peer;
	static char buf[65536];
	if (!strcmp(mode, "stream-recv")) {
		int s = sock(addr, port, 1, &peer);
		long long got = 0;
		double first = 0, last = 0, quiet = now() + 10;
		while (got < n && now() < quiet) {
			ssize_t r = recv(s, buf, sizeof(buf), 0);
			if (r > 0) {
				last = now();
				if (!got)
					first = last;
				got += r;
				quiet = last + 2;
			}
		}
		printf("%.1f MB/s (%lld of %lld bytes)\n", got / (last - first + 1e-9) / 1e6, got, n);
	} else if (!strcmp(mode, "stream-send")) {
		int size = argc > 5 ? atoi(argv[5]) : 4096;
		int s = sock(addr, port, 0, &peer);
		for (long long sent = 0; sent < n;) {
			if (sendto(s, buf, size, 0, (struct sockaddr *)&peer, sizeof(peer)) == size)
				sent += size;
		}
	} else if (!strcmp(mode, "pp-server")) {
		int s = sock(addr, port, 1, &peer);
		struct sockaddr_in from;
		socklen_t len = sizeof(from);
		double end = now() + 30;
		for (long long i = 0; i < n && now() < end;) {
			ssize_t r = recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len);
			if (r > 0) {
				sendto(s, buf, r, 0, (struct sockaddr *)&from, len);
				i++;
			}
		}
	} else if (!strcmp(mode, "pp-client")) {
		int s = sock(addr, port, 0, &peer);
		double *half = calloc(n, sizeof(double)), end = now() + 30;
		long long done = 0;
		for (; done < n && now() < end; done++) {
			double t0 = now();
			sendto(s, buf, 2, 0, (struct sockaddr *)&peer, sizeof(peer));
			while (recv(s, buf, sizeof(buf), 0) != 2 && now() < end)
				;
			half[done] = (now() - t0) / 2 * 1e6;
		}
		qsort(half, done, sizeof(double), cmp);
		printf("%.2f us (median half round trip of %lld)\n", done ? half[done / 2] : 0.0, done);
	} else if (!strcmp(mode, "ack-server")) {
		int s = sock(addr, port, 1, &peer);
		struct sockaddr_in from;
		socklen_t len = sizeof(from);
		double end = now() + 30;
		for (long long i = 0; i < n && now() < end;) {
			if (recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len) != 2)
				continue;
			sendto(s, buf, 1, 0, (struct sockaddr *)&from, len);
			sendto(s, buf, 2, 0, (struct sockaddr *)&from, len);
			while (recv(s, buf, sizeof(buf), 0) != 1 && now() < end)
				;
			i++;
		}
	} else if (!strcmp(mode, "ack-client")) {
		int s = sock(addr, port, 0, &peer);
		double *half = calloc(n, sizeof(double)), end = now() + 30;
		long long done = 0;
		for (; done < n && now() < end; done++) {
			double t0 = now();
			sendto(s, buf, 2, 0, (struct sockaddr *)&peer, sizeof(peer));
			int acked = 0, answered = 0;
			while (!(acked && answered) && now() < end) {
				ssize_t r = recv(s, buf, sizeof(buf), 0);
				acked |= r == 1;
				answered |= r == 2;
			}
			sendto(s, buf, 1, 0, (struct sockaddr *)&peer, sizeof(peer));
			half[done] = (now() - t0) / 2 * 1e6;
		}
		qsort(half, done, sizeof(double), cmp);
		printf("%.2f us (median half round trip of %lld)\n", done ? half[done / 2] : 0.0, done);
	} else if (!strcmp(mode, "batch-server")) {
		int s = sock(addr, port, 1, &peer);
		struct sockaddr_in from;
		socklen_t len = sizeof(from);
		static char ack[1], msg[2];
		struct iovec iov[2] = { { ack, 1 }, { msg, 2 } };
		double end = now() + 30;
		for (long long i = 0; i < n && now() < end;) {
			if (recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len) != 2)
				continue;
			struct mmsghdr m[2];
			memset(m, 0, sizeof(m));
			for (int k = 0; k < 2; k++) {
				m[k].msg_hdr.msg_name = &from;
				m[k].msg_hdr.msg_namelen = len;
				m[k].msg_hdr.msg_iov = &iov[k];
				m[k].msg_hdr.msg_iovlen = 1;
			}
			sendmmsg(s, m, 2, 0);
			while (recv(s, buf, sizeof(buf), 0) != 1 && now() < end)
				;
			i++;
		}
	} else if (!strcmp(mode, "batch-client")) {
		int s = sock(addr, port, 0, &peer);
		double *half = calloc(n, sizeof(double)), end = now() + 30;
		static char bufs[2][64];
		long long done = 0;
		for (; done < n && now() < end; done++) {
			double t0 = now();
			sendto(s, buf, 2, 0, (struct sockaddr *)&peer, sizeof(peer));
			int acked = 0, answered = 0;
			while (!(acked && answered) && now() < end) {
				struct iovec iov[2] = { { bufs[0], 64 }, { bufs[1], 64 } };
				struct mmsghdr m[2];
				memset(m, 0, sizeof(m));
				for (int k = 0; k < 2; k++) {
					m[k].msg_hdr.msg_iov = &iov[k];
					m[k].msg_hdr.msg_iovlen = 1;
				}
				int got = recvmmsg(s, m, 2, MSG_DONTWAIT, NULL);
				for (int k = 0; k < got; k++) {
					acked |= m[k].msg_len == 1;
					answered |= m[k].msg_len == 2;
				}
			}
			sendto(s, buf, 1, 0, (struct sockaddr *)&peer, sizeof(peer));
			half[done] = (now() - t0) / 2 * 1e6;
		}
		qsort(half, done, sizeof(double), cmp);
		printf("%.2f us (median half round trip of %lld)\n", done ? half[done / 2] : 0.0, done);
	} else {
		fprintf(stderr, "%s: unknown mode\n", mode);
		return 2;
	}
	return 0;
}
