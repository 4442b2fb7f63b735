#define _GNU_SOURCE
#include "CTSS2.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>

static ctss2_api api;
static const ctss2_api *loaded;
static char error[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *open_library(const char *name) {
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!handle) snprintf(error, sizeof error, "%s cannot be loaded (install tpm2-tss: libtss2-esys-3.0.2-0, libtss2-tctildr0, libtss2-mu0)", name);
    return handle;
}

#define RESOLVE(handle, field, symbol) \
    do { \
        *(void **)&api.field = dlsym(handle, #symbol); \
        if (!api.field) { snprintf(error, sizeof error, "tpm2-tss lacks %s", #symbol); return; } \
    } while (0)

static void load(void) {
    if (ctss2_process_is_static()) {
        snprintf(error, sizeof error, "a statically linked program cannot load tpm2-tss");
        return;
    }
    setenv("TSS2_LOG", "all+NONE", 0);
    void *tctildr = open_library("libtss2-tctildr.so.0");
    if (!tctildr) return;
    void *esys = open_library("libtss2-esys.so.0");
    if (!esys) return;
    void *mu = open_library("libtss2-mu.so.0");
    if (!mu) return;
    RESOLVE(tctildr, tctildr_initialize, Tss2_TctiLdr_Initialize);
    RESOLVE(tctildr, tctildr_finalize, Tss2_TctiLdr_Finalize);
    RESOLVE(esys, initialize, Esys_Initialize);
    RESOLVE(esys, finalize, Esys_Finalize);
    RESOLVE(esys, free, Esys_Free);
    RESOLVE(esys, get_capability, Esys_GetCapability);
    RESOLVE(esys, create_primary, Esys_CreatePrimary);
    RESOLVE(esys, create, Esys_Create);
    RESOLVE(esys, load, Esys_Load);
    RESOLVE(esys, unseal, Esys_Unseal);
    RESOLVE(esys, flush_context, Esys_FlushContext);
    RESOLVE(esys, start_auth_session, Esys_StartAuthSession);
    RESOLVE(esys, session_set_attributes, Esys_TRSess_SetAttributes);
    RESOLVE(esys, set_auth, Esys_TR_SetAuth);
    RESOLVE(esys, get_name, Esys_TR_GetName);
    RESOLVE(mu, public_marshal, Tss2_MU_TPM2B_PUBLIC_Marshal);
    RESOLVE(mu, public_unmarshal, Tss2_MU_TPM2B_PUBLIC_Unmarshal);
    RESOLVE(mu, private_marshal, Tss2_MU_TPM2B_PRIVATE_Marshal);
    RESOLVE(mu, private_unmarshal, Tss2_MU_TPM2B_PRIVATE_Unmarshal);
    loaded = &api;
}

const ctss2_api *ctss2_load(void) {
    pthread_once(&once, load);
    return loaded;
}

const char *ctss2_load_error(void) {
    pthread_once(&once, load);
    return loaded ? "" : error;
}

const char *ctss2_tcti_from_environment(void) {
    return secure_getenv("KEYCHAIN_TPM_TCTI");
}

int ctss2_process_is_static(void) {
    return getauxval(AT_BASE) == 0;
}
