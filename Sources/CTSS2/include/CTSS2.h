#ifndef CTSS2_H
#define CTSS2_H
/* tpm2-tss (ESAPI, the TCTI loader, marshalling), reached through a table of its functions that
 * is filled at run time with dlopen(3): Debian ships no static tpm2-tss for the fully static
 * tools to link, and a machine without libtss2 installed must behave as one without a TPM. The
 * types and constants come from tpm2-tss's own headers; each pointer has the type of the function
 * it holds (checked by the C compiler against those headers). */
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_tctildr.h>

typedef struct ctss2_api {
    __typeof__(Tss2_TctiLdr_Initialize) *tctildr_initialize;
    __typeof__(Tss2_TctiLdr_Finalize) *tctildr_finalize;
    __typeof__(Esys_Initialize) *initialize;
    __typeof__(Esys_Finalize) *finalize;
    __typeof__(Esys_Free) *free;
    __typeof__(Esys_GetCapability) *get_capability;
    __typeof__(Esys_CreatePrimary) *create_primary;
    __typeof__(Esys_Create) *create;
    __typeof__(Esys_Load) *load;
    __typeof__(Esys_Unseal) *unseal;
    __typeof__(Esys_FlushContext) *flush_context;
    __typeof__(Esys_StartAuthSession) *start_auth_session;
    __typeof__(Esys_TRSess_SetAttributes) *session_set_attributes;
    __typeof__(Esys_TR_SetAuth) *set_auth;
    __typeof__(Esys_TR_GetName) *get_name;
    __typeof__(Tss2_MU_TPM2B_PUBLIC_Marshal) *public_marshal;
    __typeof__(Tss2_MU_TPM2B_PUBLIC_Unmarshal) *public_unmarshal;
    __typeof__(Tss2_MU_TPM2B_PRIVATE_Marshal) *private_marshal;
    __typeof__(Tss2_MU_TPM2B_PRIVATE_Unmarshal) *private_unmarshal;
} ctss2_api;

/* The table, loaded once (thread-safe); NULL when libtss2-esys, -tctildr or -mu cannot be loaded,
 * and always in a static process (ctss2_process_is_static); ctss2_load_error() then says why.
 * Before loading, TSS2_LOG is set to "all+NONE" unless the environment sets it already:
 * tpm2-tss otherwise prints every TPM error (a wrong password included) on standard error. */
const ctss2_api *ctss2_load(void);
const char *ctss2_load_error(void);

/* Whether this process runs without a dynamic loader (linked with -static-executable). There,
 * libraries loaded with dlopen(3) get a second C library whose thread-specific data collides with
 * the first's (tpm2-tss's libcrypto then crashes): such a process asks keychain-tpm-helper. */
int ctss2_process_is_static(void);

/* $KEYCHAIN_TPM_TCTI through secure_getenv(3) (a GNU extension Swift's Glibc does not export):
 * NULL in a set-user-ID or otherwise privileged process, where a TCTI string chosen by the caller
 * could load any library (tpm2-tss takes a path as a TCTI name) or run a command (the cmd TCTI). */
const char *ctss2_tcti_from_environment(void);

#endif
