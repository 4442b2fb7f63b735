#define _GNU_SOURCE
#include "CLinux.h"
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

int clinux_peer_credentials(int fd, uint32_t *uid, int32_t *pid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *uid = credentials.uid;
    *pid = credentials.pid;
    return 0;
}

int clinux_pass_credentials(int fd) {
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
}

long clinux_receive_from(int fd, void *buffer, size_t length, int32_t *sender) {
    struct iovec part = {buffer, length};
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(struct ucred))];
    } control;
    struct msghdr message = {0};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof control.space;
    *sender = -1;
    ssize_t received = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    if (received < 0 || (message.msg_flags & MSG_CTRUNC)) return received;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c != NULL; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(c), sizeof credentials);
            *sender = credentials.pid;
        }
    }
    return received;
}

int clinux_block_termination(int block) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    return pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}
