/* The Secret Service provider's own cost per request, as a long-running client (a browser, an
 * IDE) sees it: one connection and one plain session, then ROUNDS lookups (SearchItems +
 * GetSecrets) or stores (CreateItem with replace in the default collection). No process start
 * and no library loading are counted, unlike `secret-tool`. Prints the median in microseconds;
 * exits 1 if any answer is wrong.
 * store-many: ROUNDS CreateItem calls in a row, each a new item (the attributes given plus
 * bench-item = its number), as a client storing many secrets at once does; prints the total
 * microseconds. store-pipelined: the same calls, all sent before the first answer is read.
 * ping: ROUNDS samples of two Peer.Ping calls to the provider (sd-bus answers them without our
 * code): the bus's part of a lookup's two round trips, the floor under it.
 * Usage: ss_client lookup|store|store-many|store-pipelined ROUNDS SECRET ATTRIBUTE VALUE [ATTRIBUTE VALUE ...]
 *        ss_client ping ROUNDS */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>

#define SERVICE "org.freedesktop.secrets"
#define SERVICE_PATH "/org/freedesktop/secrets"
#define SERVICE_IFACE "org.freedesktop.Secret.Service"

static int fail(const char *what, int r, const sd_bus_error *error) {
    fprintf(stderr, "ss_client: %s: %s\n", what, error && error->message ? error->message : strerror(-r));
    exit(1);
}

static int append_attributes(sd_bus_message *m, char **pairs, int count) {
    int r = sd_bus_message_open_container(m, 'a', "{ss}");
    for (int i = 0; r >= 0 && i + 1 < count; i += 2) r = sd_bus_message_append(m, "{ss}", pairs[i], pairs[i + 1]);
    return r < 0 ? r : sd_bus_message_close_container(m);
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* SearchItems, then GetSecrets of the first unlocked match; checks the secret. */
static void lookup(sd_bus *bus, const char *session, const char *expect, char **pairs, int count) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *m = NULL, *reply = NULL;
    int r = sd_bus_message_new_method_call(bus, &m, SERVICE, SERVICE_PATH, SERVICE_IFACE, "SearchItems");
    if (r >= 0) r = append_attributes(m, pairs, count);
    if (r >= 0) r = sd_bus_call(bus, m, 0, &error, &reply);
    if (r < 0) fail("SearchItems", r, &error);
    const char *item = NULL;
    if (sd_bus_message_enter_container(reply, 'a', "o") < 0 || sd_bus_message_read(reply, "o", &item) <= 0)
        fail("SearchItems found nothing unlocked", -ENOENT, NULL);
    char found[256];
    snprintf(found, sizeof found, "%s", item);
    sd_bus_message_unref(m);
    sd_bus_message_unref(reply);

    m = reply = NULL;
    r = sd_bus_message_new_method_call(bus, &m, SERVICE, SERVICE_PATH, SERVICE_IFACE, "GetSecrets");
    if (r >= 0) r = sd_bus_message_append(m, "aoo", 1, found, session);
    if (r >= 0) r = sd_bus_call(bus, m, 0, &error, &reply);
    if (r < 0) fail("GetSecrets", r, &error);
    const char *path, *secret_session, *content_type;
    const void *parameters, *value;
    size_t parameters_size, size;
    if (sd_bus_message_enter_container(reply, 'a', "{o(oayays)}") <= 0 ||
        sd_bus_message_enter_container(reply, 'e', "o(oayays)") <= 0 || sd_bus_message_read(reply, "o", &path) <= 0 ||
        sd_bus_message_enter_container(reply, 'r', "oayays") <= 0 || sd_bus_message_read(reply, "o", &secret_session) <= 0 ||
        sd_bus_message_read_array(reply, 'y', &parameters, &parameters_size) < 0 ||
        sd_bus_message_read_array(reply, 'y', &value, &size) < 0 || sd_bus_message_read(reply, "s", &content_type) <= 0)
        fail("GetSecrets answered no secret", -EBADMSG, NULL);
    if (size != strlen(expect) || memcmp(value, expect, size) != 0) fail("GetSecrets returned another secret", -EBADMSG, NULL);
    sd_bus_message_unref(m);
    sd_bus_message_unref(reply);
}

/* A CreateItem(replace) call in the default collection. */
static sd_bus_message *create_item(sd_bus *bus, const char *session, const char *secret, char **pairs, int count) {
    sd_bus_message *m = NULL;
    int r = sd_bus_message_new_method_call(bus, &m, SERVICE, SERVICE_PATH "/aliases/default",
                                           "org.freedesktop.Secret.Collection", "CreateItem");
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "{sv}");
    if (r >= 0) r = sd_bus_message_append(m, "{sv}", "org.freedesktop.Secret.Item.Label", "s", "bench");
    if (r >= 0) r = sd_bus_message_open_container(m, 'e', "sv");
    if (r >= 0) r = sd_bus_message_append(m, "s", "org.freedesktop.Secret.Item.Attributes");
    if (r >= 0) r = sd_bus_message_open_container(m, 'v', "a{ss}");
    if (r >= 0) r = append_attributes(m, pairs, count);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_open_container(m, 'r', "oayays");
    if (r >= 0) r = sd_bus_message_append(m, "o", session);
    if (r >= 0) r = sd_bus_message_append_array(m, 'y', "", 0);
    if (r >= 0) r = sd_bus_message_append_array(m, 'y', secret, strlen(secret));
    if (r >= 0) r = sd_bus_message_append(m, "s", "text/plain");
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_append(m, "b", 1);
    if (r < 0) fail("CreateItem", r, NULL);
    return m;
}

/* An item stored, and no prompt ("/" expected): anything else counts as a failure. */
static void check_created(sd_bus_message *reply) {
    const char *item, *prompt;
    if (sd_bus_message_read(reply, "oo", &item, &prompt) <= 0 || strcmp(prompt, "/") != 0 || strcmp(item, "/") == 0)
        fail("CreateItem asked for a prompt", -EACCES, NULL);
}

static void store(sd_bus *bus, const char *session, const char *secret, char **pairs, int count) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *m = create_item(bus, session, secret, pairs, count), *reply = NULL;
    int r = sd_bus_call(bus, m, 0, &error, &reply);
    if (r < 0) fail("CreateItem", r, &error);
    check_created(reply);
    sd_bus_message_unref(m);
    sd_bus_message_unref(reply);
}

static int answered;

static int on_created(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    if (sd_bus_message_is_method_error(reply, NULL)) fail("CreateItem", -EIO, sd_bus_message_get_error(reply));
    check_created(reply);
    answered++;
    return 1;
}

/* store-pipelined: every CreateItem sent before the first answer is read, as a client making
 * asynchronous calls (libsecret's secret_password_store, GDBus) sends them; then every answer. */
static void store_pipelined(sd_bus *bus, const char *session, const char *secret, char **pairs, int count, char *number,
                            int rounds) {
    answered = 0;
    for (int i = 0; i < rounds; i++) {
        snprintf(number, 32, "%d", i);
        sd_bus_message *m = create_item(bus, session, secret, pairs, count);
        int r = sd_bus_call_async(bus, NULL, m, on_created, NULL, 0);
        if (r < 0) fail("CreateItem", r, NULL);
        sd_bus_message_unref(m);
    }
    while (answered < rounds) {
        int r = sd_bus_process(bus, NULL);
        if (r < 0) fail("the answers", r, NULL);
        if (r == 0 && (r = sd_bus_wait(bus, 30 * 1000000ULL)) < 0) fail("the answers", r, NULL);
    }
}

static int ping(int rounds) {
    sd_bus *bus = NULL;
    int r = sd_bus_open_user(&bus);
    if (r < 0) fail("the session bus", r, NULL);
    double *samples = calloc((size_t)rounds, sizeof *samples);
    for (int i = -5; i < rounds; i++) {
        double start = now_us();
        for (int k = 0; k < 2; k++) {
            sd_bus_error error = SD_BUS_ERROR_NULL;
            sd_bus_message *reply = NULL;
            r = sd_bus_call_method(bus, SERVICE, SERVICE_PATH, "org.freedesktop.DBus.Peer", "Ping", &error, &reply, "");
            if (r < 0) fail("Ping", r, &error);
            sd_bus_message_unref(reply);
        }
        if (i >= 0) samples[i] = now_us() - start;
    }
    qsort(samples, (size_t)rounds, sizeof *samples, by_value);
    printf("%.1f\n", samples[rounds / 2]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "ping") == 0 && atoi(argv[2]) >= 1) return ping(atoi(argv[2]));
    if (argc < 6 || (argc - 4) % 2 != 0 || atoi(argv[2]) < 1 ||
        (strcmp(argv[1], "lookup") != 0 && strcmp(argv[1], "store") != 0 && strcmp(argv[1], "store-many") != 0 &&
         strcmp(argv[1], "store-pipelined") != 0)) {
        fprintf(stderr, "usage: ss_client lookup|store|store-many|store-pipelined ROUNDS SECRET ATTRIBUTE VALUE [ATTRIBUTE VALUE ...]\n");
        return 2;
    }
    int storing = strcmp(argv[1], "store") == 0, rounds = atoi(argv[2]), warmup = 5;
    int pipelined = strcmp(argv[1], "store-pipelined") == 0, many = pipelined || strcmp(argv[1], "store-many") == 0;
    const char *secret = argv[3];
    sd_bus *bus = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    int r = sd_bus_open_user(&bus);
    if (r < 0) fail("the session bus", r, NULL);
    r = sd_bus_call_method(bus, SERVICE, SERVICE_PATH, SERVICE_IFACE, "OpenSession", &error, &reply, "sv", "plain", "s", "");
    if (r < 0) fail("OpenSession", r, &error);
    const char *session_path;
    if (sd_bus_message_skip(reply, "v") < 0 || sd_bus_message_read(reply, "o", &session_path) <= 0) fail("OpenSession", -EBADMSG, NULL);
    char session[256];
    snprintf(session, sizeof session, "%s", session_path);
    sd_bus_message_unref(reply);

    if (many) {
        int count = argc - 4 + 2;
        char **pairs = calloc(count, sizeof *pairs), number[32];
        memcpy(pairs, argv + 4, (argc - 4) * sizeof *pairs);
        pairs[count - 2] = "bench-item";
        pairs[count - 1] = number;
        double start = now_us();
        if (pipelined) store_pipelined(bus, session, secret, pairs, count, number, rounds);
        for (int i = 0; !pipelined && i < rounds; i++) {
            snprintf(number, sizeof number, "%d", i);
            store(bus, session, secret, pairs, count);
        }
        printf("%.1f\n", now_us() - start);
        free(pairs);
        sd_bus_call_method(bus, SERVICE, session, "org.freedesktop.Secret.Session", "Close", NULL, NULL, "");
        sd_bus_flush_close_unref(bus);
        return 0;
    }
    double *samples = calloc(rounds, sizeof *samples);
    for (int i = -warmup; i < rounds; i++) {
        double start = now_us();
        if (storing) store(bus, session, secret, argv + 4, argc - 4);
        else lookup(bus, session, secret, argv + 4, argc - 4);
        if (i >= 0) samples[i] = now_us() - start;
    }
    qsort(samples, rounds, sizeof *samples, by_value);
    printf("%.1f\n", samples[rounds / 2]);
    sd_bus_call_method(bus, SERVICE, session, "org.freedesktop.Secret.Session", "Close", NULL, NULL, "");
    sd_bus_flush_close_unref(bus);
    free(samples);
    return 0;
}
