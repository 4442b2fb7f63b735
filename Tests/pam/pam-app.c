/* A PAM application for the suite, doing what sudo and login do with one handle:
 *
 *   pam-app SERVICE USER [--as TARGET] [--hold FILE]   (the password is the first line of stdin)
 *
 * pam_start(SERVICE, USER), pam_authenticate, pam_acct_mgmt; with --as, pam_set_item(PAM_USER,
 * TARGET) as sudo does before it opens the target's session; then pam_setcred(PAM_ESTABLISH_CRED)
 * and pam_open_session. With --hold, FILE is opened first and stays open, as /etc/shadow stays
 * open in applications that read it themselves.
 *
 * It also observes the module's worker: this program defines initgroups(), which the worker calls
 * as it drops to the user (executable symbols come first in the dynamic linker's lookup), and in
 * any process other than this one prints the descriptors and environment it finds there to
 * stderr ("worker-fd N TARGET", "worker-env NAME=..."), then calls the real one. Nothing in the
 * module is changed or asked for this. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <security/pam_appl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;
static pid_t main_pid;
static char password[512];

int initgroups(const char *user, gid_t group) {
    if (main_pid != 0 && getpid() != main_pid) {
        DIR *dir = opendir("/proc/self/fd");
        struct dirent *entry;
        while (dir && (entry = readdir(dir)) != NULL) {
            if (entry->d_name[0] == '.') continue;
            char link[300], target[512];
            snprintf(link, sizeof link, "/proc/self/fd/%s", entry->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            target[n < 0 ? 0 : n] = 0;
            if (dir && atoi(entry->d_name) == dirfd(dir)) strcpy(target, "this-listing");
            dprintf(2, "worker-fd %s %s\n", entry->d_name, target);
        }
        if (dir) closedir(dir);
        for (char **e = environ; e && *e; e++) dprintf(2, "worker-env %s\n", *e);
        dprintf(2, "worker-observed\n");
    }
    int (*real)(const char *, gid_t) = (int (*)(const char *, gid_t))dlsym(RTLD_NEXT, "initgroups");
    return real ? real(user, group) : -1;
}

static int converse(int n, const struct pam_message **msg, struct pam_response **resp, void *data) {
    (void)data;
    struct pam_response *r = calloc((size_t)n, sizeof *r);
    if (!r) return PAM_BUF_ERR;
    for (int i = 0; i < n; i++) {
        if (msg[i]->msg_style == PAM_PROMPT_ECHO_OFF || msg[i]->msg_style == PAM_PROMPT_ECHO_ON)
            r[i].resp = strdup(password);
    }
    *resp = r;
    return PAM_SUCCESS;
}

static int step(pam_handle_t *pamh, const char *what, int rc) {
    if (rc != PAM_SUCCESS) fprintf(stderr, "pam-app: %s: %s\n", what, pam_strerror(pamh, rc));
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pam-app SERVICE USER [--as TARGET] [--hold FILE]\n");
        return 2;
    }
    const char *target = NULL;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--as") == 0) target = argv[i + 1];
        else if (strcmp(argv[i], "--hold") == 0 && open(argv[i + 1], O_RDONLY) < 0) { perror(argv[i + 1]); return 2; }
    }
    if (!fgets(password, sizeof password, stdin)) password[0] = 0;
    password[strcspn(password, "\n")] = 0;
    main_pid = getpid();

    struct pam_conv conv = { converse, NULL };
    pam_handle_t *pamh = NULL;
    if (pam_start(argv[1], argv[2], &conv, &pamh) != PAM_SUCCESS) return 1;
    int rc = step(pamh, "authenticate", pam_authenticate(pamh, 0));
    if (rc == PAM_SUCCESS) rc = step(pamh, "acct_mgmt", pam_acct_mgmt(pamh, 0));
    if (rc == PAM_SUCCESS && target) rc = step(pamh, "set_item", pam_set_item(pamh, PAM_USER, target));
    if (rc == PAM_SUCCESS) rc = step(pamh, "setcred", pam_setcred(pamh, PAM_ESTABLISH_CRED));
    if (rc == PAM_SUCCESS) rc = step(pamh, "open_session", pam_open_session(pamh, 0));
    pam_end(pamh, rc);
    explicit_bzero(password, sizeof password);
    return rc == PAM_SUCCESS ? 0 : 1;
}
