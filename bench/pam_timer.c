/* pam_timer SERVICE USER ROUNDS: logs USER in through SERVICE ROUNDS times (password from stdin)
 * and prints the milliseconds each pam_open_session took, one per line. Authentication is not
 * timed: pam_unix's own hash is not ours to measure. */
#include <security/pam_appl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char password[256];

static int converse(int n, const struct pam_message **msg, struct pam_response **resp, void *data) {
    (void)data;
    struct pam_response *r = calloc((size_t)n, sizeof *r);
    if (!r) return PAM_BUF_ERR;
    for (int i = 0; i < n; i++)
        if (msg[i]->msg_style == PAM_PROMPT_ECHO_OFF || msg[i]->msg_style == PAM_PROMPT_ECHO_ON)
            r[i].resp = strdup(password);
    *resp = r;
    return PAM_SUCCESS;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 4 || !fgets(password, sizeof password, stdin)) {
        fprintf(stderr, "usage: pam_timer SERVICE USER ROUNDS < password\n");
        return 2;
    }
    password[strcspn(password, "\n")] = 0;
    struct pam_conv conv = {converse, NULL};
    for (int round = 0; round < atoi(argv[3]); round++) {
        pam_handle_t *pamh;
        if (pam_start(argv[1], argv[2], &conv, &pamh) != PAM_SUCCESS) return 1;
        if (pam_authenticate(pamh, 0) != PAM_SUCCESS) {
            fprintf(stderr, "pam_timer: authentication failed\n");
            return 1;
        }
        double start = now_ms();
        int rc = pam_open_session(pamh, 0);
        double elapsed = now_ms() - start;
        if (rc != PAM_SUCCESS) return 1;
        printf("%.3f\n", elapsed);
        pam_close_session(pamh, 0);
        pam_end(pamh, PAM_SUCCESS);
    }
    return 0;
}
