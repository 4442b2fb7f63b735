#include "CSDBus.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static csdbus_handlers handlers;

static int on_method(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    return handlers.method(m, userdata, error);
}

static int on_get(sd_bus *bus, const char *path, const char *interface, const char *property,
                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)bus;
    return handlers.get(path, interface, property, reply, userdata, error);
}

static int on_set(sd_bus *bus, const char *path, const char *interface, const char *property,
                  sd_bus_message *value, void *userdata, sd_bus_error *error) {
    (void)bus;
    return handlers.set(path, interface, property, value, userdata, error);
}

static int on_find(sd_bus *bus, const char *path, const char *interface, void *userdata,
                   void **found, sd_bus_error *error) {
    (void)bus; (void)error;
    if (!handlers.find(path, interface, userdata)) return 0;
    *found = userdata;
    return 1;
}

static int on_enumerate(sd_bus *bus, const char *path, void *userdata, char ***nodes, sd_bus_error *error) {
    (void)bus; (void)error;
    char **list = handlers.enumerate(path, userdata);
    if (!list) return -ENOMEM;
    *nodes = list;
    return 0;
}

#define M(name, in, in_names, out, out_names) \
    SD_BUS_METHOD_WITH_NAMES(name, in, in_names, out, out_names, on_method, SD_BUS_VTABLE_UNPRIVILEGED)
#define P(name, sig) SD_BUS_PROPERTY(name, sig, on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE)
#define W(name, sig) SD_BUS_WRITABLE_PROPERTY(name, sig, on_get, on_set, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE | SD_BUS_VTABLE_UNPRIVILEGED)
/* Announced by name only: PropertiesChanged is a broadcast, and a sandboxed app may not see what an
 * item's label and attributes, or which items a collection holds, say; each client Gets them in
 * its own view. */
#define PI(name, sig) SD_BUS_PROPERTY(name, sig, on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION)
#define WI(name, sig) SD_BUS_WRITABLE_PROPERTY(name, sig, on_get, on_set, 0, SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION | SD_BUS_VTABLE_UNPRIVILEGED)

static const sd_bus_vtable service_vtable[] = {
    SD_BUS_VTABLE_START(0),
    M("OpenSession", "sv", SD_BUS_PARAM(algorithm) SD_BUS_PARAM(input), "vo", SD_BUS_PARAM(output) SD_BUS_PARAM(result)),
    M("CreateCollection", "a{sv}s", SD_BUS_PARAM(properties) SD_BUS_PARAM(alias), "oo", SD_BUS_PARAM(collection) SD_BUS_PARAM(prompt)),
    M("SearchItems", "a{ss}", SD_BUS_PARAM(attributes), "aoao", SD_BUS_PARAM(unlocked) SD_BUS_PARAM(locked)),
    M("Unlock", "ao", SD_BUS_PARAM(objects), "aoo", SD_BUS_PARAM(unlocked) SD_BUS_PARAM(prompt)),
    M("Lock", "ao", SD_BUS_PARAM(objects), "aoo", SD_BUS_PARAM(locked) SD_BUS_PARAM(Prompt)),
    M("LockService", "", SD_BUS_PARAM(), "", SD_BUS_PARAM()),
    M("GetSecrets", "aoo", SD_BUS_PARAM(items) SD_BUS_PARAM(session), "a{o(oayays)}", SD_BUS_PARAM(secrets)),
    M("ReadAlias", "s", SD_BUS_PARAM(name), "o", SD_BUS_PARAM(collection)),
    M("SetAlias", "so", SD_BUS_PARAM(name) SD_BUS_PARAM(collection), "", SD_BUS_PARAM()),
    P("Collections", "ao"),
    SD_BUS_SIGNAL_WITH_NAMES("CollectionCreated", "o", SD_BUS_PARAM(collection), 0),
    SD_BUS_SIGNAL_WITH_NAMES("CollectionDeleted", "o", SD_BUS_PARAM(collection), 0),
    SD_BUS_SIGNAL_WITH_NAMES("CollectionChanged", "o", SD_BUS_PARAM(collection), 0),
    SD_BUS_VTABLE_END
};

static const sd_bus_vtable collection_vtable[] = {
    SD_BUS_VTABLE_START(0),
    M("Delete", "", SD_BUS_PARAM(), "o", SD_BUS_PARAM(prompt)),
    M("SearchItems", "a{ss}", SD_BUS_PARAM(attributes), "ao", SD_BUS_PARAM(results)),
    M("CreateItem", "a{sv}(oayays)b", SD_BUS_PARAM(properties) SD_BUS_PARAM(secret) SD_BUS_PARAM(replace),
      "oo", SD_BUS_PARAM(item) SD_BUS_PARAM(prompt)),
    PI("Items", "ao"),
    W("Label", "s"),
    P("Locked", "b"),
    P("Created", "t"),
    P("Modified", "t"),
    SD_BUS_SIGNAL_WITH_NAMES("ItemCreated", "o", SD_BUS_PARAM(item), 0),
    SD_BUS_SIGNAL_WITH_NAMES("ItemDeleted", "o", SD_BUS_PARAM(item), 0),
    SD_BUS_SIGNAL_WITH_NAMES("ItemChanged", "o", SD_BUS_PARAM(item), 0),
    SD_BUS_VTABLE_END
};

static const sd_bus_vtable item_vtable[] = {
    SD_BUS_VTABLE_START(0),
    M("Delete", "", SD_BUS_PARAM(), "o", SD_BUS_PARAM(Prompt)),
    M("GetSecret", "o", SD_BUS_PARAM(session), "(oayays)", SD_BUS_PARAM(secret)),
    M("SetSecret", "(oayays)", SD_BUS_PARAM(secret), "", SD_BUS_PARAM()),
    P("Locked", "b"),
    WI("Attributes", "a{ss}"),
    WI("Label", "s"),
    P("Created", "t"),
    P("Modified", "t"),
    SD_BUS_VTABLE_END
};

static const sd_bus_vtable session_vtable[] = {
    SD_BUS_VTABLE_START(0),
    M("Close", "", SD_BUS_PARAM(), "", SD_BUS_PARAM()),
    SD_BUS_VTABLE_END
};

static const sd_bus_vtable prompt_vtable[] = {
    SD_BUS_VTABLE_START(0),
    M("Prompt", "s", SD_BUS_PARAM(window_id), "", SD_BUS_PARAM()),
    M("Dismiss", "", SD_BUS_PARAM(), "", SD_BUS_PARAM()),
    SD_BUS_SIGNAL_WITH_NAMES("Completed", "bv", SD_BUS_PARAM(dismissed) SD_BUS_PARAM(result), 0),
    SD_BUS_VTABLE_END
};

/* The nodes this connection serves objects at and under: the Service object, the Collection and
 * Item subtrees, the Session and Prompt subtrees, and the portal's object. */
enum { ROOT, COLLECTIONS, ALIASES, SESSIONS, PROMPTS, PORTAL, NODES };
static const char *const nodes[NODES] = {
    [ROOT] = "/org/freedesktop/secrets", [COLLECTIONS] = "/org/freedesktop/secrets/collection",
    [ALIASES] = "/org/freedesktop/secrets/aliases", [SESSIONS] = "/org/freedesktop/secrets/session",
    [PROMPTS] = "/org/freedesktop/secrets/prompt", [PORTAL] = CSDBUS_PORTAL_PATH,
};
enum { COLLECTION, ITEM, SESSION, PROMPT, INTERFACES };
static const char *const interfaces[INTERFACES] = {
    [COLLECTION] = "org.freedesktop.Secret.Collection", [ITEM] = "org.freedesktop.Secret.Item",
    [SESSION] = "org.freedesktop.Secret.Session", [PROMPT] = "org.freedesktop.Secret.Prompt",
};

static int is_node(const char *path) {
    for (int i = 0; i < NODES; i++) {
        if (strcmp(nodes[i], path) == 0) return 1;
    }
    return 0;
}

/* "/", "/org", "/org/freedesktop", "/org/freedesktop/portal": folders introspection walks down. */
static int is_above_a_node(const char *path) {
    size_t length = strlen(path);
    if (strcmp(path, "/") == 0) return 1;
    for (int i = 0; i < NODES; i++) {
        if (strncmp(nodes[i], path, length) == 0 && nodes[i][length] == '/') return 1;
    }
    return 0;
}

/* Whether the path has the shape of one of the service's objects (the vtables' own test). */
static int is_object(const char *path, void *userdata) {
    for (int i = 0; i < INTERFACES; i++) {
        if (handlers.find(path, interfaces[i], userdata)) return 1;
    }
    return 0;
}

/* A call no object took; the last handler sd-bus tries. On a path that is no object of this
 * service, the spec's NoSuchObject, as for a deleted item, instead of sd-bus's UnknownObject,
 * which clients such as SecretStorage 3.3 (Debian 12's) do not take for a missing item
 * (gnome-keyring's GDBus answers UnknownMethod, which they do). Being registered at "/" makes
 * every path an object to sd-bus, so the answers it gave before are given here: UnknownObject
 * for the folders above the nodes, and for introspecting a path that is none of them. */
static int on_elsewhere(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    const char *path = sd_bus_message_get_path(m);
    if (!path || is_node(path) || is_object(path, userdata)) return 0;
    int introspect = sd_bus_message_is_method_call(m, "org.freedesktop.DBus.Introspectable", "Introspect");
    if (introspect && is_above_a_node(path)) return 0;
    if (introspect || is_above_a_node(path)) return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_OBJECT, "Unknown object '%s'.", path);
    return sd_bus_error_setf(error, "org.freedesktop.Secret.Error.NoSuchObject", "No such object: %s", path);
}

int csdbus_register(sd_bus *bus, const csdbus_handlers *h, void *userdata) {
    handlers = *h;
    int r;
    if ((r = sd_bus_add_object_vtable(bus, NULL, nodes[ROOT], "org.freedesktop.Secret.Service", service_vtable, userdata)) < 0) return r;
    for (int tree = COLLECTIONS; tree <= ALIASES; tree++) {
        if ((r = sd_bus_add_fallback_vtable(bus, NULL, nodes[tree], interfaces[COLLECTION], collection_vtable, on_find, userdata)) < 0) return r;
        if ((r = sd_bus_add_fallback_vtable(bus, NULL, nodes[tree], interfaces[ITEM], item_vtable, on_find, userdata)) < 0) return r;
    }
    if ((r = sd_bus_add_fallback_vtable(bus, NULL, nodes[SESSIONS], interfaces[SESSION], session_vtable, on_find, userdata)) < 0) return r;
    if ((r = sd_bus_add_fallback_vtable(bus, NULL, nodes[PROMPTS], interfaces[PROMPT], prompt_vtable, on_find, userdata)) < 0) return r;
    /* Introspection lists the children of each object: sd-bus asks the enumerators of the node it
     * found the object under, so each subtree has one. */
    for (int node = ROOT; node <= PROMPTS; node++) {
        if ((r = sd_bus_add_node_enumerator(bus, NULL, nodes[node], on_enumerate, userdata)) < 0) return r;
    }
    return sd_bus_add_fallback(bus, NULL, "/", on_elsewhere, userdata);
}
