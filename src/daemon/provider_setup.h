/*
 * provider_setup — everything tollgate needs to talk to its provider, made
 * from the config in one place: the request and reply maps and the signing
 * string (checked when the config is loaded, so that a mapping that cannot
 * be evaluated stops the program with a message naming its key), the
 * transport's config, and the credentials read from their files.
 *
 * provider_setup_credentials() is THE way credentials reach the transport:
 * at start and whenever they are re-read at run time (key rotation without
 * a restart: exit_env_reload_credentials()). The API key and the signing
 * key are read with the config's secret reader (config_read_secret); the
 * client certificate and key as PEM files, the key refused when its file is
 * readable by group or others. Every copy made here is wiped.
 */
#ifndef TG_PROVIDER_SETUP_H
#define TG_PROVIDER_SETUP_H

#include <stddef.h>

#include "core/provider_map.h"
#include "core/template.h"
#include "daemon/config.h"
#include "net/transport.h"

/* The compiled mapping of one config. Plain data (large: keep it on the
 * heap). */
struct provider_maps {
        struct request_map request;
        struct reply_map reply;
        struct template signing; /* meaningful when signing is configured */
        /* provider.header lines, one "Name: value" a line, '\n' between */
        char fixed_headers[TG_CONFIG_MAX_HEADERS * TG_CONFIG_LINE];
};

/* Compiles and checks the mapping: every template and field source, the
 * map as a whole, and one evaluation of each path, body and the signing
 * string for a sample refund with and without its optional fields. 0 or
 * TG_ECONFIG with err holding "provider.KEY: problem". */
int provider_setup_maps(const struct tg_config *config, struct provider_maps *ret_maps, char *err,
                        size_t err_size);

/* The transport's config for `config` over `maps` (which must outlive the
 * transport_new() call; the transport copies them). */
void provider_setup_transport_config(const struct tg_config *config,
                                     const struct provider_maps *maps, unsigned max_open,
                                     struct transport_config *ret_config);

/* Reads the credentials the config names and gives them to the transport
 * (transport_set_credentials: calls already open keep theirs). 0, or
 * TG_ECONFIG / -errno with err holding "provider.KEY: problem"; the
 * transport keeps its previous credentials on failure. */
int provider_setup_credentials(const struct tg_config *config, struct transport *transport,
                               char *err, size_t err_size);
/* The same for one lane of a transport of several accounts (config: that
 * account's view); provider_setup_credentials() is lane 0's. */
int provider_setup_lane_credentials(const struct tg_config *config, struct transport *transport,
                                    unsigned lane, char *err, size_t err_size);

#endif
