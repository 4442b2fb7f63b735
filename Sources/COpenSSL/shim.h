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

/* KWallet's .kwl files (KWalletItems): Blowfish-CBC (or ECB in the oldest files) and SHA-1, as its
 * backend does them. EVP has Blowfish only in OpenSSL 3's legacy provider, which a static program
 * cannot load; the low-level functions need no provider but are deprecated, hence the wrappers. */
#include <openssl/blowfish.h>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"

/* Blowfish over whole 8-byte blocks in place, CBC with a zero IV (KWallet's CipherBlockChain) or
 * ECB. Returns 0, or -1 for a key of 1 to 56 bytes or a length not of whole blocks. */
static inline int keychain_blowfish(const unsigned char *key, int key_length, unsigned char *data, size_t length, int cbc,
                                    int encrypt) {
    if (key_length < 1 || key_length > 56 || length % BF_BLOCK != 0) return -1;
    BF_KEY schedule;
    BF_set_key(&schedule, key_length, key);
    int mode = encrypt ? BF_ENCRYPT : BF_DECRYPT;
    if (cbc) {
        unsigned char iv[BF_BLOCK];
        memset(iv, 0, sizeof iv);
        BF_cbc_encrypt(data, data, (long)length, &schedule, iv, mode);
    } else {
        for (size_t i = 0; i < length; i += BF_BLOCK) BF_ecb_encrypt(data + i, data + i, &schedule, mode);
    }
    OPENSSL_cleanse(&schedule, sizeof schedule);
    return 0;
}

/* KWallet's own SHA-1 (its sha1.cc), which its .kwl files' checksum and the key of old wallets
 * use: SHA-1's padding and rounds, but built with Q_BYTE_ORDER forced to big-endian, so on the
 * little-endian machines wallets come from it reads each 32-bit word of a block little-endian
 * and writes the digest's words little-endian. Here: each padded block's words swapped, then
 * libcrypto's own SHA-1 block function. */
static inline void keychain_kwallet_sha1(const unsigned char *data, size_t length, unsigned char out[20]) {
    SHA_CTX ctx;
    SHA1_Init(&ctx);
    unsigned char block[64];
    size_t done = 0;
    int padded = 0, lengthWritten = 0;
    while (!lengthWritten) {
        size_t take = length - done < 64 ? length - done : 64;
        memset(block, 0, sizeof block);
        memcpy(block, data + done, take);
        done += take;
        if (take < 64 && !padded) {
            block[take] = 0x80;
            padded = 1;
        }
        if (padded && take < 56) {
            uint64_t bits = (uint64_t)length * 8;
            for (int i = 0; i < 8; i++) block[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
            lengthWritten = 1;
        }
        for (int i = 0; i < 64; i += 4) {
            unsigned char t0 = block[i], t1 = block[i + 1];
            block[i] = block[i + 3];
            block[i + 1] = block[i + 2];
            block[i + 2] = t1;
            block[i + 3] = t0;
        }
        SHA1_Transform(&ctx, block);
    }
    unsigned int h[5] = {ctx.h0, ctx.h1, ctx.h2, ctx.h3, ctx.h4};
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (unsigned char)h[i];
        out[4 * i + 1] = (unsigned char)(h[i] >> 8);
        out[4 * i + 2] = (unsigned char)(h[i] >> 16);
        out[4 * i + 3] = (unsigned char)(h[i] >> 24);
    }
    OPENSSL_cleanse(&ctx, sizeof ctx);
    OPENSSL_cleanse(block, sizeof block);
}

#pragma clang diagnostic pop
