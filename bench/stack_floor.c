/* The least resident memory of a Secret Service provider on this project's stack: a process that
 * only owns a name on the session bus (sd-bus), runs one SQLite query, initialises libsodium,
 * seals with OpenSSL 3's AES-256-GCM (the keychain's file format) and does one 1024-bit DH
 * exponentiation (the dh-ietf1024 session). No Swift, no items, no engine. Prints VmRSS in KiB. */
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

static const char *prime = "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DDEF"
                           "9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7EDEE"
                           "386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF";

int main(void) {
    sd_bus *bus = NULL;
    if (sd_bus_open_user(&bus) < 0 || sd_bus_request_name(bus, "org.keychain_linux.bench.floor", 0) < 0) return 1;
    sqlite3 *db;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
        sqlite3_exec(db, "CREATE TABLE t(a BLOB); INSERT INTO t VALUES (randomblob(64)); SELECT * FROM t;", 0, 0, 0) != SQLITE_OK)
        return 1;
    if (sodium_init() < 0) return 1;
    unsigned char key[32], nonce[12], out[48], tag[16];
    int length;
    randombytes_buf(key, sizeof key);
    randombytes_buf(nonce, sizeof nonce);
    EVP_CIPHER *gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (!gcm || !ctx || EVP_EncryptInit_ex(ctx, gcm, NULL, key, nonce) != 1 || EVP_EncryptUpdate(ctx, out, &length, key, 32) != 1 ||
        EVP_EncryptFinal_ex(ctx, out + length, &length) != 1 || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1)
        return 1;
    BIGNUM *p = NULL, *g = BN_new(), *x = BN_new(), *y = BN_new();
    BN_CTX *bn = BN_CTX_new();
    if (!BN_hex2bn(&p, prime) || !BN_set_word(g, 2) || !BN_rand(x, 1000, 0, 0) || !BN_mod_exp_mont_consttime(y, g, x, p, bn, NULL)) return 1;
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    while (status && fgets(line, sizeof line, status))
        if (strncmp(line, "VmRSS:", 6) == 0) { long kib; if (sscanf(line + 6, "%ld", &kib) == 1) printf("%ld\n", kib); }
    return 0;
}
