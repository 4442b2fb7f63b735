#ifndef PAM_KEYCHAIN_SHIM_H
#define PAM_KEYCHAIN_SHIM_H
#include <security/pam_modules.h>

/* One line to syslog through pam_syslog, which is variadic and so out of Swift's reach. */
void pam_keychain_log(pam_handle_t *pamh, int priority, const char *message);

/* Keeps copies of PAM_AUTHTOK and of the PAM_USER it was typed for, for setcred and open_session;
 * PAM's cleanup wipes both before freeing them. PAM_IGNORE when there is no password. */
int pam_keychain_stash(pam_handle_t *pamh);
/* The stashed password while PAM_USER is still the user it was typed for; NULL otherwise. When
 * the user changed since (sudo -u, which authenticates one user and opens another's session),
 * *for_other_user is set to 1 and the password is not handed out. */
const char *pam_keychain_stashed(pam_handle_t *pamh, int *for_other_user);
/* Wipes and drops the stash now. */
void pam_keychain_unstash(pam_handle_t *pamh);

/* First thing in the worker, a fork of the application without exec: moves `keep` (or nothing,
 * when negative) to descriptor 3, closes every other inherited descriptor above 2 and clears the
 * environment. 0, or -1 when `keep` could not be moved (nothing closed then). */
int pam_keychain_isolate_worker(int keep);

/* pipe2(2) with O_CLOEXEC, which Swift's Glibc module does not declare: the worker's reply pipe
 * must not leak into programs the application runs. */
int pam_keychain_pipe(int fds[2]);

#endif
