#define _GNU_SOURCE
#include "CLinux.h"
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

int clinux_block_termination(int block) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    return pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

long clinux_receive_with_descriptor(int fd, void *buffer, size_t length, int32_t *sender, int32_t *passed) {
    struct iovec part = {buffer, length};
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
    } control;
    struct msghdr message = {0};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof control.space;
    *sender = -1;
    *passed = -1;
    ssize_t received = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    if (received < 0) return received;
    int extra = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c != NULL; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(c), sizeof credentials);
            *sender = credentials.pid;
        } else if (c->cmsg_type == SCM_RIGHTS) {
            size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; i++) {
                int given;
                memcpy(&given, CMSG_DATA(c) + i * sizeof(int), sizeof given);
                if (*passed < 0 && !extra) {
                    *passed = given;
                } else {
                    close(given);
                    extra = 1;
                }
            }
        }
    }
    /* More than one descriptor, or more than fitted: none is kept, and the sender is not
     * believed (the message is refused). */
    if (extra || (message.msg_flags & MSG_CTRUNC)) {
        if (*passed >= 0) close(*passed);
        *passed = -1;
        *sender = -1;
    }
    return received;
}

long clinux_send_with_descriptor(int fd, const void *buffer, size_t length, int passed) {
    struct iovec part = {(void *)buffer, length};
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = {0};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof control.space;
    struct cmsghdr *c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &passed, sizeof passed);
    return sendmsg(fd, &message, MSG_NOSIGNAL);
}
