/*
 * tls.h - the daemon's TLS policy (GnuTLS through libmicrohttpd): explicit priorities, a
 * certificate that can be replaced while serving, and a handshake deadline.
 *
 * Priorities: TLS_DEFAULT_PRIORITIES unless the operator gives a GnuTLS priority string:
 * TLS 1.2 and 1.3 only, forward-secret key exchange (ECDHE, DHE) with AEAD ciphers only
 * (AES-GCM, ChaCha20-Poly1305), the server's order.
 *
 * Certificate: served through a GnuTLS certificate callback (MHD_OPTION_HTTPS_CERT_CALLBACK)
 * from the current credential; tls_load_credentials parses and checks a new PEM pair
 * (chain of at most 16, the key matches the first certificate) and swaps it in only when
 * all is well: new handshakes get it, connections already up keep theirs. Replaced
 * credentials are kept until tls_release (a session may still point at them); one per
 * reload, a few kilobytes each.
 *
 * Handshake deadline: a TLS connection that has not finished its handshake and sent its
 * first request's headers within --tls-handshake-timeout is shut down: the deadline of the
 * first request head (edge.h) counts from accept, handshake included.
 * State is process-wide: one TLS server per process.
 */
#ifndef HTTP_TLS_H
#define HTTP_TLS_H

#include <stddef.h>

#include <microhttpd.h>

#define TLS_DEFAULT_PRIORITIES                                                                     \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:+DHE-RSA:"         \
    "-CIPHER-ALL:+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-GCM:-MAC-ALL:+AEAD:%SERVER_PRECEDENCE"

/* Check a GnuTLS priority string: 0, or -1 with where it fails in err. */
int tls_check_priorities(const char *priorities, char *err, size_t errlen);

/* Parse and check a PEM certificate chain and key (NUL-terminated) and make them the
 * served credential: 0, or -1 with the reason in err and the previous credential kept. */
int tls_load_credentials(const char *cert_pem, const char *key_pem, char *err, size_t errlen);

/* Fill opts (room for TLS_NOPTIONS items, the last MHD_OPTION_END) with the TLS options:
 * priorities and the certificate callback. 0, or -1 (no credential loaded). */
#define TLS_NOPTIONS 3
int tls_start(struct MHD_OptionItem *opts, const char *priorities);

/* Free the credentials (after MHD_stop_daemon). */
void tls_release(void);

#endif
