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
