/* peakrss FILE CMD [ARG...]: runs CMD once with FILE as its standard input and prints its peak
 * resident set in KiB (ru_maxrss from wait4). A launcher this small is used rather than Python
 * because the kernel carries the forked parent's high-water mark through exec. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: peakrss FILE CMD [ARG...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid == 0) {
        int in = open(argv[1], O_RDONLY), out = open("/dev/null", O_WRONLY);
        if (in < 0 || out < 0) _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    int status;
    struct rusage usage;
    if (pid < 0 || wait4(pid, &status, 0, &usage) < 0) return 2;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "peakrss: %s failed\n", argv[2]);
        return 1;
    }
    printf("%ld\n", usage.ru_maxrss);
    return 0;
}
