/* healthcheck.c - probe GET /healthz over HTTP or pinned TLS (see healthcheck.h). */
#include "healthcheck.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "textfile.h"
#include "../core/common/clock.h"

/* A TCP connection to host:port within the deadline, or -1 with why. */
static int dial(const char *host, unsigned port, double deadline, char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;
    if (strcmp(host, "0.0.0.0") == 0)
        host = "127.0.0.1";
    else if (strcmp(host, "::") == 0)
        host = "::1";
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        len = sizeof *v4;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        len = sizeof *v6;
    } else {
        snprintf(why, whylen, "--listen '%s' is not an IPv4 or IPv6 address", host);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, whylen, "cannot make a socket: %s", strerror(errno));
        return -1;
    }
    int rc = connect(fd, (struct sockaddr *)&ss, len);
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};
        int ms = (int)((deadline - dpb_mono_s()) * 1e3);
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (ms > 0 && poll(&p, 1, ms) == 1 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0)
            errno = soerr;
        else
            errno = ETIMEDOUT;
        rc = soerr == 0 && errno != ETIMEDOUT ? 0 : -1;
    }
    if (rc != 0) {
        snprintf(why, whylen, "cannot connect to %s port %u: %s", host, port, strerror(errno));
        close(fd);
        return -1;
    }
    /* blocking from here, with timeouts on each read and write */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    double left = deadline - dpb_mono_s();
    struct timeval tv = {(time_t)left, (suseconds_t)((left - (double)(time_t)left) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

/* The DER of the first certificate in a PEM file, or -1 with why. */
static int pinned_der(const char *path, gnutls_datum_t *der, char *why, size_t whylen)
{
    textfile f;
    if (textfile_read(&f, path, (size_t)1 << 20, why, whylen) != 0)
        return -1;
    gnutls_x509_crt_t crt;
    gnutls_datum_t pem = {(unsigned char *)f.buf, (unsigned)f.len};
    int rc = gnutls_x509_crt_init(&crt);
    if (rc == 0) {
        rc = gnutls_x509_crt_import(crt, &pem, GNUTLS_X509_FMT_PEM);
        if (rc == 0)
            rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_DER, der);
        gnutls_x509_crt_deinit(crt);
    }
    textfile_release(&f);
    if (rc != 0) {
        snprintf(why, whylen, "--tls-cert %s: no certificate there (%s)", path,
                 gnutls_strerror(rc));
        return -1;
    }
    return 0;
}

int healthcheck(const char *host, unsigned port, const char *cert_path, double timeout_s, char *why,
                size_t whylen)
{
    double deadline = dpb_mono_s() + timeout_s;
    gnutls_datum_t pin = {NULL, 0};
    gnutls_session_t tls = NULL;
    gnutls_certificate_credentials_t cred = NULL;
    int fd = -1, rc = -1, g;
    if (cert_path && pinned_der(cert_path, &pin, why, whylen) != 0)
        goto out;
    if ((fd = dial(host, port, deadline, why, whylen)) < 0)
        goto out;
    if (cert_path) {
        if ((g = gnutls_certificate_allocate_credentials(&cred)) < 0 ||
            (g = gnutls_init(&tls, GNUTLS_CLIENT)) < 0 ||
            (g = gnutls_set_default_priority(tls)) < 0 ||
            (g = gnutls_credentials_set(tls, GNUTLS_CRD_CERTIFICATE, cred)) < 0) {
            snprintf(why, whylen, "cannot set up TLS: %s", gnutls_strerror(g));
            goto out;
        }
        gnutls_transport_set_int(tls, fd);
        gnutls_handshake_set_timeout(tls, (unsigned)(timeout_s * 1e3));
        gnutls_record_set_timeout(tls, (unsigned)(timeout_s * 1e3));
        do
            g = gnutls_handshake(tls);
        while (g < 0 && gnutls_error_is_fatal(g) == 0 && dpb_mono_s() < deadline);
        if (g < 0) {
            snprintf(why, whylen, "TLS handshake with %s port %u failed: %s", host, port,
                     gnutls_strerror(g));
            goto out;
        }
        unsigned n = 0;
        const gnutls_datum_t *peer = gnutls_certificate_get_peers(tls, &n);
        if (peer == NULL || n == 0 || peer[0].size != pin.size ||
            memcmp(peer[0].data, pin.data, pin.size) != 0) {
            snprintf(why, whylen,
                     "the certificate served on port %u is not the one in --tls-cert %s (after "
                     "replacing it, send the daemon SIGHUP)",
                     port, cert_path);
            goto out;
        }
    }
    static const char req[] = "GET /healthz HTTP/1.0\r\nHost: localhost\r\nUser-Agent: "
                              "dpbudgetd-healthcheck\r\nConnection: close\r\n\r\n";
    ssize_t w = tls ? gnutls_record_send(tls, req, sizeof req - 1)
                    : send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
    if (w != (ssize_t)(sizeof req - 1)) {
        snprintf(why, whylen, "cannot send the request to port %u: %s", port,
                 tls ? gnutls_strerror((int)w) : strerror(errno));
        goto out;
    }
    char buf[256];
    size_t got = 0;
    while (got < sizeof buf - 1 && memchr(buf, '\n', got) == NULL && dpb_mono_s() < deadline) {
        ssize_t r = tls ? gnutls_record_recv(tls, buf + got, sizeof buf - 1 - got)
                        : recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED || (r < 0 && errno == EINTR))
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    char *eol = strpbrk(buf, "\r\n");
    if (eol)
        *eol = '\0';
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*1[01] %3d", &status) != 1) {
        snprintf(why, whylen, "no HTTP answer from port %u within %.0f s%s%.60s", port, timeout_s,
                 got ? ": " : "", buf);
        goto out;
    }
    if (status != 200) {
        snprintf(why, whylen, "GET /healthz on port %u answered %d, not 200", port, status);
        goto out;
    }
    snprintf(why, whylen, "GET /healthz on port %u answered 200%s", port, tls ? " over TLS" : "");
    rc = 0;
out:
    if (tls) {
        gnutls_bye(tls, GNUTLS_SHUT_WR);
        gnutls_deinit(tls);
    }
    if (cred)
        gnutls_certificate_free_credentials(cred);
    if (fd >= 0)
        close(fd);
    gnutls_free(pin.data);
    return rc;
}
