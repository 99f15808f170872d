/* tls.c - TLS policy, reloadable certificate, handshake deadline (see tls.h). */
#include "tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#define MAX_CHAIN 16

typedef struct cred {
    gnutls_pcert_st pcert[MAX_CHAIN];
    unsigned n;
    gnutls_privkey_t key;
    struct cred *older; /* replaced credentials, kept until tls_release */
} cred;

static struct {
    pthread_mutex_t lock; /* guards everything below */
    cred *cur;
} T = {PTHREAD_MUTEX_INITIALIZER, NULL};

int tls_check_priorities(const char *priorities, char *err, size_t errlen)
{
    gnutls_priority_t p;
    const char *at = NULL;
    int rc = gnutls_priority_init(&p, priorities, &at);
    if (rc != GNUTLS_E_SUCCESS) {
        snprintf(err, errlen, "not a GnuTLS priority string (%s) at '%.40s'", gnutls_strerror(rc),
                 at ? at : priorities);
        return -1;
    }
    gnutls_priority_deinit(p);
    return 0;
}

static void cred_free(cred *c)
{
    for (unsigned i = 0; i < c->n; i++)
        gnutls_pcert_deinit(&c->pcert[i]);
    if (c->key)
        gnutls_privkey_deinit(c->key);
    free(c);
}

/* 1 when the private key belongs to the certificate's public key. */
static int key_matches(gnutls_privkey_t key, gnutls_pubkey_t certkey)
{
    gnutls_pubkey_t pub = NULL;
    gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
    int same = gnutls_pubkey_init(&pub) == 0 && gnutls_pubkey_import_privkey(pub, key, 0, 0) == 0 &&
               gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &a) == 0 &&
               gnutls_pubkey_export2(certkey, GNUTLS_X509_FMT_DER, &b) == 0 && a.size == b.size &&
               memcmp(a.data, b.data, a.size) == 0;
    gnutls_free(a.data);
    gnutls_free(b.data);
    if (pub)
        gnutls_pubkey_deinit(pub);
    return same;
}

int tls_load_credentials(const char *cert_pem, const char *key_pem, char *err, size_t errlen)
{
    cred *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    gnutls_datum_t cd = {(unsigned char *)cert_pem, (unsigned)strlen(cert_pem)};
    gnutls_datum_t kd = {(unsigned char *)key_pem, (unsigned)strlen(key_pem)};
    c->n = MAX_CHAIN;
    int rc = gnutls_pcert_list_import_x509_raw(c->pcert, &c->n, &cd, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) {
        c->n = 0;
        snprintf(err, errlen, "the certificate chain does not parse (%s%s)", gnutls_strerror(rc),
                 rc == GNUTLS_E_SHORT_MEMORY_BUFFER ? ": more than 16 certificates" : "");
        goto fail;
    }
    if (c->n == 0) {
        snprintf(err, errlen, "no certificate in the PEM file");
        goto fail;
    }
    if ((rc = gnutls_privkey_init(&c->key)) < 0 ||
        (rc = gnutls_privkey_import_x509_raw(c->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        snprintf(err, errlen, "the private key does not parse (%s)", gnutls_strerror(rc));
        goto fail;
    }
    if (!key_matches(c->key, c->pcert[0].pubkey)) {
        snprintf(err, errlen, "the private key is not the key of the (first) certificate");
        goto fail;
    }
    pthread_mutex_lock(&T.lock);
    c->older = T.cur;
    T.cur = c;
    pthread_mutex_unlock(&T.lock);
    return 0;
fail:
    cred_free(c);
    return -1;
}

/* gnutls_certificate_retrieve_function2: the current credential, for every handshake. */
static int retrieve(gnutls_session_t s, const gnutls_datum_t *req_ca_rdn, int nreqs,
                    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                    gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
    (void)s, (void)req_ca_rdn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
    pthread_mutex_lock(&T.lock);
    cred *c = T.cur;
    pthread_mutex_unlock(&T.lock);
    if (c == NULL)
        return -1;
    *pcert = c->pcert;
    *pcert_length = c->n;
    *privkey = c->key;
    return 0;
}

int tls_start(struct MHD_OptionItem *opts, const char *priorities)
{
    if (T.cur == NULL)
        return -1;
    struct MHD_OptionItem o[TLS_NOPTIONS] = {
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)priorities},
        {MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)retrieve},
        {MHD_OPTION_END, 0, NULL},
    };
    memcpy(opts, o, sizeof o);
    return 0;
}

void tls_release(void)
{
    pthread_mutex_lock(&T.lock);
    cred *c = T.cur;
    T.cur = NULL;
    pthread_mutex_unlock(&T.lock);
    while (c) {
        cred *o = c->older;
        cred_free(c);
        c = o;
    }
}
