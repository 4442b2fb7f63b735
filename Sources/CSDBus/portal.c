#include "CSDBus.h"

/* xdg-desktop-portal's Secret backend (org.freedesktop.impl.portal.Secret), on the same connection
 * as the Secret Service: the portal's `.portal` file names org.freedesktop.secrets as its bus name.
 * The method may answer later (after an unlock prompt): its handler keeps the message. */

static csdbus_portal_handlers portal_handlers;

static int on_portal_method(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    return portal_handlers.method(m, userdata, error);
}

static int on_portal_get(sd_bus *bus, const char *path, const char *interface, const char *property,
                         sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)bus;
    return portal_handlers.get(path, interface, property, reply, userdata, error);
}

static const sd_bus_vtable portal_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD_WITH_NAMES("RetrieveSecret", "osha{sv}",
                             SD_BUS_PARAM(handle) SD_BUS_PARAM(app_id) SD_BUS_PARAM(fd) SD_BUS_PARAM(options),
                             "ua{sv}", SD_BUS_PARAM(response) SD_BUS_PARAM(results),
                             on_portal_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_PROPERTY("version", "u", on_portal_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_VTABLE_END
};

int csdbus_register_portal(sd_bus *bus, const csdbus_portal_handlers *h, void *userdata) {
    portal_handlers = *h;
    return sd_bus_add_object_vtable(bus, NULL, CSDBUS_PORTAL_PATH, "org.freedesktop.impl.portal.Secret",
                                    portal_vtable, userdata);
}
