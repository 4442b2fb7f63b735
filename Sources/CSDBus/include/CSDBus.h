#ifndef CSDBUS_H
#define CSDBUS_H
/* sd-bus for the Secret Service provider. The object tables are C macros over unions, which Swift
 * cannot build, so they live here; every entry points at one of five callbacks that Swift sets. */
#include <systemd/sd-bus.h>

typedef struct {
    /* A method call on any of the provider's objects; the member and path are in the message. */
    int (*method)(sd_bus_message *message, void *userdata, sd_bus_error *error);
    int (*get)(const char *path, const char *interface, const char *property, sd_bus_message *reply,
               void *userdata, sd_bus_error *error);
    int (*set)(const char *path, const char *interface, const char *property, sd_bus_message *value,
               void *userdata, sd_bus_error *error);
    /* Whether an object with this interface exists at this path (1 yes, 0 no). */
    int (*find)(const char *path, const char *interface, void *userdata);
    /* The children of `path` for introspection: a malloc'd NULL-terminated array of malloc'd paths. */
    char **(*enumerate)(const char *path, void *userdata);
} csdbus_handlers;

/* Registers the Service object and the Collection, Item, Session and Prompt subtrees. */
int csdbus_register(sd_bus *bus, const csdbus_handlers *handlers, void *userdata);

/* xdg-desktop-portal's Secret backend: RetrieveSecret and the version property at
 * CSDBUS_PORTAL_PATH (portal.c). */
#define CSDBUS_PORTAL_PATH "/org/freedesktop/portal/desktop"
typedef struct {
    int (*method)(sd_bus_message *message, void *userdata, sd_bus_error *error);
    int (*get)(const char *path, const char *interface, const char *property, sd_bus_message *reply,
               void *userdata, sd_bus_error *error);
} csdbus_portal_handlers;

int csdbus_register_portal(sd_bus *bus, const csdbus_portal_handlers *handlers, void *userdata);

#endif
