// The other way to notice a program's store to a doorbell record: userfaultfd write
// protection. The storing thread faults; a watcher thread reads the event and lifts the
// protection, which lets the store through; the next store is protected again. Its cost per
// store beside an eventfd ping-pong between two threads, for docs/measured.md:
//   cc -O2 -pthread capi/benches/uffd_cost.c -o /tmp/uffd_cost && /tmp/uffd_cost
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int uffd;
static volatile uint32_t *page;
static long pagesz;
static const int N = 20000;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }

static void wp(int on) {
    struct uffdio_writeprotect w = { .range = { (uintptr_t)page, pagesz }, .mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0 };
    if (ioctl(uffd, UFFDIO_WRITEPROTECT, &w)) { perror("UFFDIO_WRITEPROTECT"); exit(1); }
}

static void *watcher(void *arg) {
    (void)arg;
    for (int i = 0; i < N; i++) {
        struct uffd_msg m;
        if (read(uffd, &m, sizeof m) != sizeof m) { perror("read"); exit(1); }
        wp(0); // the store goes through; the device would now read the doorbell
    }
    return NULL;
}

static int efd_a, efd_b;
static void *pong(void *arg) {
    (void)arg; uint64_t v;
    for (int i = 0; i < N; i++) { read(efd_a, &v, 8); write(efd_b, &v, 8); }
    return NULL;
}

static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }

int main(void) {
    pagesz = sysconf(_SC_PAGESIZE);
    uffd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    if (uffd < 0) uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
    if (uffd < 0) { perror("userfaultfd"); return 2; }
    struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP };
    if (ioctl(uffd, UFFDIO_API, &api)) { perror("UFFDIO_API"); return 2; }
    page = mmap(NULL, pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    page[0] = 0;
    struct uffdio_register r = { .range = { (uintptr_t)page, pagesz }, .mode = UFFDIO_REGISTER_MODE_WP };
    if (ioctl(uffd, UFFDIO_REGISTER, &r)) { perror("UFFDIO_REGISTER"); return 2; }
    static double t[20000];
    pthread_t th; pthread_create(&th, NULL, watcher, NULL);
    for (int i = 0; i < N; i++) {
        wp(1);
        double a = now();
        page[0] = i; // faults until the watcher lifts the protection
        t[i] = now() - a;
    }
    pthread_join(th, NULL);
    qsort(t, N, sizeof t[0], cmp);
    printf("userfaultfd WP store: median %.1f us, p90 %.1f us\n", t[N / 2] / 1e3, t[N * 9 / 10] / 1e3);
    efd_a = eventfd(0, 0); efd_b = eventfd(0, 0);
    pthread_create(&th, NULL, pong, NULL);
    for (int i = 0; i < N; i++) { uint64_t v = 1; double a = now(); write(efd_a, &v, 8); read(efd_b, &v, 8); t[i] = now() - a; }
    pthread_join(th, NULL);
    qsort(t, N, sizeof t[0], cmp);
    printf("eventfd ping-pong round trip: median %.1f us, p90 %.1f us\n", t[N / 2] / 1e3, t[N * 9 / 10] / 1e3);
    static double s[20000];
    for (int i = 0; i < N; i++) { double a = now(); page[0] = i; s[i] = now() - a; }
    qsort(s, N, sizeof s[0], cmp);
    printf("plain store (watched by polling): median %.3f us\n", s[N / 2] / 1e3);
    return 0;
}
