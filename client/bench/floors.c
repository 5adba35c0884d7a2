// The machine's floors, to read raftlock's figures against: p50/p90/p99 of
// a 4 KiB append + fdatasync (what each log flush costs at least), a 1-byte
// loopback TCP round trip with TCP_NODELAY (each RPC hop), and a pipe round
// trip between two processes (two wake-ups, the cost of a thread hand-off).
// Each line also gives the CPU time (user + system) spent per operation by
// the process that runs the loop, and for the round trips by the echoing
// process: on loopback the sender's write also runs the receiver's TCP
// receive path and its wake-up, so a message costs its sender more CPU
// than the bytes suggest.
// The performance issue quotes fdatasync p50 0.14-0.22 ms and loopback p50
// 0.07 ms for the machine its comparison table was measured on.
//
//   cc -O2 -o /tmp/floors client/bench/floors.c && /tmp/floors [DIR]
//
// DIR (default .) is where the fdatasync test file goes: use the disk the
// data dirs are on.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 20000
static double lat[N];

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double cpu_us(int who) {
  struct rusage u;
  getrusage(who, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}

static double cpu_of(struct rusage *u) {
  return (u->ru_utime.tv_sec + u->ru_stime.tv_sec) * 1e6 + u->ru_utime.tv_usec + u->ru_stime.tv_usec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *what, int n, double cpu, double other_cpu) {
  qsort(lat, n, sizeof(double), cmp);
  printf("%-34s p50 %7.1f us  p90 %7.1f us  p99 %7.1f us  CPU/op %5.1f us", what, lat[n / 2],
         lat[n * 9 / 10], lat[n * 99 / 100], cpu / n);
  if (other_cpu >= 0) printf(" (echo side %5.1f us)", other_cpu / n);
  printf("\n");
}

static void fsyncs(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/floors-fsync.%d", dir, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) { perror(path); exit(1); }
  char buf[4096];
  memset(buf, 'x', sizeof buf);
  int n = 2000;
  double cpu0 = cpu_us(RUSAGE_SELF);
  for (int i = 0; i < n; i++) {
    if (write(fd, buf, sizeof buf) != sizeof buf) { perror("write"); exit(1); }
    double t = now_us();
    if (fdatasync(fd) != 0) { perror("fdatasync"); exit(1); }
    lat[i] = now_us() - t;
  }
  double cpu = cpu_us(RUSAGE_SELF) - cpu0;
  close(fd);
  unlink(path);
  report("4 KiB append + fdatasync", n, cpu, -1);
}

static void loopback(void) {
  int one = 1;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x7f000001);
  socklen_t len = sizeof a;
  if (bind(ls, (void *)&a, sizeof a) || listen(ls, 1) || getsockname(ls, (void *)&a, &len)) {
    perror("listen");
    exit(1);
  }
  pid_t echo = fork();
  if (echo == 0) {
    int c = accept(ls, 0, 0);
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char b;
    while (read(c, &b, 1) == 1 && write(c, &b, 1) == 1) {}
    _exit(0);
  }
  close(ls);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(s, (void *)&a, sizeof a)) { perror("connect"); exit(1); }
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char b = 'x';
  double cpu0 = cpu_us(RUSAGE_SELF);
  for (int i = 0; i < N; i++) {
    double t = now_us();
    if (write(s, &b, 1) != 1 || read(s, &b, 1) != 1) { perror("loopback"); exit(1); }
    lat[i] = now_us() - t;
  }
  double cpu = cpu_us(RUSAGE_SELF) - cpu0;
  close(s);
  struct rusage u;
  wait4(echo, 0, 0, &u);
  report("loopback TCP round trip", N, cpu, cpu_of(&u));
}

static void pipes(void) {
  int there[2], back[2];
  if (pipe(there) || pipe(back)) { perror("pipe"); exit(1); }
  pid_t echo = fork();
  if (echo == 0) {
    close(there[1]);
    char b;
    while (read(there[0], &b, 1) == 1 && write(back[1], &b, 1) == 1) {}
    _exit(0);
  }
  close(there[0]);
  close(back[1]);
  char b = 'x';
  double cpu0 = cpu_us(RUSAGE_SELF);
  for (int i = 0; i < N; i++) {
    double t = now_us();
    if (write(there[1], &b, 1) != 1 || read(back[0], &b, 1) != 1) { perror("pipe"); exit(1); }
    lat[i] = now_us() - t;
  }
  double cpu = cpu_us(RUSAGE_SELF) - cpu0;
  close(there[1]);
  struct rusage u;
  wait4(echo, 0, 0, &u);
  report("pipe round trip (two wake-ups)", N, cpu, cpu_of(&u));
}

int main(int argc, char **argv) {
  fsyncs(argc > 1 ? argv[1] : ".");
  loopback();
  pipes();
  return 0;
}
