/*
 * healthcheck.h - dpbudgetd --healthcheck: GET /healthz from the running daemon, over plain
 * HTTP or TLS as it is configured, with no client library but GnuTLS (already linked
 * through libmicrohttpd).
 *
 * With TLS the server's certificate is pinned: the leaf it presents must be byte for byte
 * the first certificate of the configured --tls-cert file (no public CA, no host name: the
 * probe talks to its own daemon). Every step has a deadline; the answer must be a status
 * line with 200.
 */
#ifndef HTTP_HEALTHCHECK_H
#define HTTP_HEALTHCHECK_H

#include <stddef.h>

/* Probe host:port (an IPv4 or IPv6 literal; the wildcard addresses mean loopback). With
 * cert_path non-NULL, speak TLS and pin that certificate. 0 when /healthz answered 200,
 * else -1 with a one-line reason in why. */
int healthcheck(const char *host, unsigned port, const char *cert_path, double timeout_s, char *why,
                size_t whylen);

#endif
