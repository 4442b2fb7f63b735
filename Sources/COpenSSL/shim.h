#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* Selections built from other macros, which Swift does not import. */
static const int KEYCHAIN_EVP_PKEY_KEYPAIR = EVP_PKEY_KEYPAIR;
static const int KEYCHAIN_EVP_PKEY_PUBLIC_KEY = EVP_PKEY_PUBLIC_KEY;

/* OSSL_PARAM_BLD keeps the key pointers it is given; Swift passes a macro string as a temporary
 * copy, so the builder's keys must be these, which live as long as the program. */
static const char *const KEYCHAIN_PARAM_GROUP_NAME = OSSL_PKEY_PARAM_GROUP_NAME;
static const char *const KEYCHAIN_PARAM_PUB_KEY = OSSL_PKEY_PARAM_PUB_KEY;
static const char *const KEYCHAIN_PARAM_PRIV_KEY = OSSL_PKEY_PARAM_PRIV_KEY;
