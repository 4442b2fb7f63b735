// The floor under a read through any broker that checks its caller on every read, as
// keychain-broker must (a tracer may attach between two reads): one SOCK_SEQPACKET round trip to
// another process, which reads the caller's /proc/PID/status through a descriptor kept open
// (TracerPid is only there) before it answers. No crypto, no lookup, no log: what is left when
// everything else costs nothing. Prints `floor_roundtrip_us` (the round trip alone) and
// `floor_us` (with the status read): medians over batches, as keychain-bench times its reads.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { batches = 41, per_batch = 500 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The median per round trip; the server reads status first when the request's byte says so.
static double measure(int fd, char read_status) {
    double per[batches];
    char message[300] = {read_status};
    for (int b = 0; b < batches; b++) {
        double start = now_us();
        for (int i = 0; i < per_batch; i++) {
            if (send(fd, message, sizeof message, 0) != sizeof message || recv(fd, message, sizeof message, 0) <= 0) exit(1);
            message[0] = read_status;
        }
        per[b] = (now_us() - start) / per_batch;
    }
    qsort(per, batches, sizeof per[0], compare);
    return per[batches / 2];
}

int main(void) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return 1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)getpid());
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        close(pair[0]);
        int status = open(path, O_RDONLY | O_CLOEXEC);
        char buffer[4096];
        for (;;) {
            ssize_t n = recv(pair[1], buffer, sizeof buffer, 0);
            if (n <= 0) _exit(0);
            if (buffer[0] && pread(status, buffer + 300, sizeof buffer - 300, 0) <= 0) _exit(1);
            if (send(pair[1], buffer, (size_t)n, 0) != n) _exit(1);
        }
    }
    close(pair[1]);
    measure(pair[0], 1);  // warm-up
    printf("floor_roundtrip_us %.2f\n", measure(pair[0], 0));
    printf("floor_us %.2f\n", measure(pair[0], 1));
    close(pair[0]);
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
