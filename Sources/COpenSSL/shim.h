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

/* SHA-256 and HMAC-SHA-256 through libcrypto's own block functions, which use the CPU's SHA
 * extensions where it has them (4-5x libsodium's portable code on the machine of bench/README.md).
 * Not through EVP: its first fetch is what costs a short process most of its time (Crypto.swift).
 * These functions are deprecated in OpenSSL 3 in favour of EVP, hence the wrappers. */
#include <openssl/sha.h>
#include <string.h>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"

/* An HMAC-SHA-256 key with its inner and outer pads already hashed: each MAC then costs the
 * message's blocks and one more. */
typedef struct {
    SHA256_CTX inner;
    SHA256_CTX outer;
} keychain_hmac_sha256_key;

static inline void keychain_sha256(const unsigned char *data, size_t length, unsigned char out[32]) {
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, data, length);
    SHA256_Final(out, &ctx);
    OPENSSL_cleanse(&ctx, sizeof ctx);
}

/* RFC 2104: a key longer than the block is hashed first, a shorter one padded with zeros. */
static inline void keychain_hmac_sha256_init(keychain_hmac_sha256_key *key, const unsigned char *bytes, size_t length) {
    unsigned char block[64], pad[64];
    memset(block, 0, sizeof block);
    if (length > sizeof block) keychain_sha256(bytes, length, block);
    else if (length > 0) memcpy(block, bytes, length);
    for (int i = 0; i < 64; i++) pad[i] = block[i] ^ 0x36;
    SHA256_Init(&key->inner);
    SHA256_Update(&key->inner, pad, sizeof pad);
    for (int i = 0; i < 64; i++) pad[i] = block[i] ^ 0x5c;
    SHA256_Init(&key->outer);
    SHA256_Update(&key->outer, pad, sizeof pad);
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(pad, sizeof pad);
}

static inline void keychain_hmac_sha256(const keychain_hmac_sha256_key *key, const unsigned char *data, size_t length,
                                        unsigned char out[32]) {
    SHA256_CTX ctx = key->inner;
    unsigned char digest[32];
    SHA256_Update(&ctx, data, length);
    SHA256_Final(digest, &ctx);
    ctx = key->outer;
    SHA256_Update(&ctx, digest, sizeof digest);
    SHA256_Final(out, &ctx);
    OPENSSL_cleanse(&ctx, sizeof ctx);
    OPENSSL_cleanse(digest, sizeof digest);
}

static inline void keychain_hmac_sha256_wipe(keychain_hmac_sha256_key *key) { OPENSSL_cleanse(key, sizeof *key); }

#pragma clang diagnostic pop
