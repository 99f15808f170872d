/* test_operator.c - what operators hand the daemon: key and config files read whole (a long
 * comment never becomes a line of its own, a key file that does not parse is refused whole),
 * SIGHUP reloads of the keys and the TLS certificate (atomic: a broken file keeps what is in
 * use), the TLS policy (TLS 1.2/1.3, forward-secret AEAD suites; gnutls-cli as the client,
 * with a permissive daemon as the control that the client did try), the handshake deadline,
 * and --healthcheck. Each test starts its own dpbudgetd. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../server/auth.h"
#include "check.h"
#include "suites.h"

#define READ_TOKEN "reader-token-1"
#define ADMIN_TOKEN "admin-token-3"
#define NEW_TOKEN "rotated-token-4"
#define READ_HASH "8ed7a3cb498a69b97157eb5c685b8831eabdc118fce9a4c75425920ab3ddf6e0"
#define ADMIN_HASH "f35ed2a6db1c26fdf985d8cc196d86a0afa41d351caf7314ecc50503fe948e38"
#define NEW_HASH "f0504f00b9dbb85f1b44162211bf4e2374daa1ae089d65ac8ca31086ecd53890"
#define EPOCH_BODY                                                                                 \
    "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":2},\"epsilon\":1}"

static char dir[64];

static const char *path_of(const char *name)
{
    static char p[8][160];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_bytes(const char *path, const char *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(bytes, 1, n, f);
        fclose(f);
    }
}

static void write_text(const char *path, const char *text)
{
    write_bytes(path, text, strlen(text));
}

/* A shell command's exit status (-1 when it did not exit). */
static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/dpb-oper-XXXXXX");
    if (mkdtemp(dir) == NULL)
        dir[0] = '\0';
}

static void teardown(void)
{
    sh("rm -rf %s", dir);
    api_set_header(NULL);
    api_set_ca(NULL);
}

static void as(const char *token)
{
    char h[128];
    snprintf(h, sizeof h, "Authorization: Bearer %s", token);
    api_set_header(token ? h : NULL);
}

static long status_of(const char *method, const char *path)
{
    api_reply r;
    if (strcmp(method, "GET") == 0)
        api_get(path, &r);
    else
        api_postf(&r, path, "%s", EPOCH_BODY);
    long st = r.status;
    api_reply_free(&r);
    return st;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* SIGHUP the daemon and wait until its log holds `want` (a reload's log line), up to 3 s. */
static int hup_and_wait(const char *want, int nth)
{
    if (api_daemon_pid() <= 0 || kill(api_daemon_pid(), SIGHUP) != 0)
        return 0;
    for (int waited = 0; waited < 10000; waited += 20) { /* generous: CI machines are loaded */
        FILE *f = fopen(api_daemon_log(), "r");
        char line[1024];
        int seen = 0;
        while (f && fgets(line, sizeof line, f))
            seen += strstr(line, want) != NULL;
        if (f)
            fclose(f);
        if (seen >= nth)
            return 1;
        sleep_ms(20);
    }
    return 0;
}

static int log_has(const char *want)
{
    FILE *f = fopen(api_daemon_log(), "r");
    char line[1024];
    int seen = 0;
    while (f && fgets(line, sizeof line, f))
        seen |= strstr(line, want) != NULL;
    if (f)
        fclose(f);
    return seen;
}

/* A revoked admin key kept as a comment on a line longer than 511 bytes stays revoked: the
 * old 512-byte line buffer parsed the line's tail as a key of its own. */
static void keyfile_long_comment_stays_comment(void)
{
    setup();
    static char keys[2048];
    char pad[600];
    /* the tail starts at byte 512 of the line, exactly where fgets(512) split it */
    size_t lead = strlen("# revoked 2026-01-01 (leaked):");
    memset(pad, 'x', sizeof pad);
    pad[511 - lead - 1] = '\0';
    snprintf(keys, sizeof keys,
             "# revoked 2026-01-01 (leaked):%s " ADMIN_HASH " admin operator-old\n" READ_HASH
             " read reader\n",
             pad);
    write_text(path_of("keys"), keys);
    const char *extra[] = {"--api-keys", path_of("keys"), NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st == 0) {
        as(ADMIN_TOKEN);
        long s = status_of("GET", "/v1/summary");
        CHECKF(s == 401, "the revoked admin key in a long comment: %ld, want 401", s);
        as(READ_TOKEN);
        CHECK(status_of("GET", "/v1/summary") == 200);
        CHECK(api_daemon_stop() == 0);
    }
    teardown();
}

/* --pld-plan-memory: 0 keeps no FFT plans (each computation plans its own) and the answer is
 * the default daemon's, bit for bit; a value that is not a whole number in [0, 65536] is
 * refused at start (exit 2, naming the option). */
static double pld_eps_with(const char *mib)
{
    const char *extra[] = {"--no-ledger", "--pld-plan-memory", mib, NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd --pld-plan-memory %s did not start (%d)", mib, st);
    if (st != 0)
        return NAN;
    api_reply r;
    api_postf(&r, "/v1/epsilon",
              "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":1000,\"event\":"
              "{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,"
              "\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1}}},"
              "\"delta\":1e-5,\"accountant\":\"pld\"}");
    CHECKF(r.status == 200, "%.300s", r.body);
    double e = r.status == 200 ? jnum(r.json, "epsilon") : NAN;
    api_reply_free(&r);
    CHECK(api_daemon_stop() == 0);
    return e;
}

static void pld_plan_memory_option(void)
{
    double none = pld_eps_with("0"), dflt = pld_eps_with("192");
    CHECKF(none > 1.8 && none < 1.9 && none == dflt, "%.17g without plans kept, %.17g with", none,
           dflt);
    static const char *const bad[] = {"-1", "65537", "1.5", "lots", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *extra[] = {"--no-ledger", "--pld-plan-memory", bad[i], NULL};
        int st = api_daemon_start(extra, NULL, "http");
        CHECKF(st == 1002, "--pld-plan-memory '%s': %d, want exit 2", bad[i], st);
        CHECK(log_has("--pld-plan-memory"));
        if (st == 0)
            api_daemon_stop();
    }
}

/* A long config comment whose tail (past byte 1023) reads as an option is not applied. */
static void config_long_comment_stays_comment(void)
{
    setup();
    write_text(path_of("keys"), READ_HASH " read reader\n");
    static char cfg[4096];
    char pad[1100];
    memset(pad, '-', sizeof pad);
    pad[1023 - 2] = '\0';
    snprintf(cfg, sizeof cfg, "api-keys = %s\n# %sopen-compute\n", path_of("keys"), pad);
    write_text(path_of("config"), cfg);
    const char *extra[] = {"--config", path_of("config"), NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st == 0) {
        as(NULL);
        long s = status_of("POST", "/v1/delta");
        CHECKF(s == 401, "the tail of a long comment opened the compute endpoints: %ld", s);
        CHECK(api_daemon_stop() == 0);
    }
    /* CRLF config files are accepted */
    snprintf(cfg, sizeof cfg, "# crlf\r\napi-keys = %s\r\nopen-compute\r\n", path_of("keys"));
    write_text(path_of("config"), cfg);
    st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "a CRLF config file: %d", st);
    if (st == 0) {
        CHECK(status_of("POST", "/v1/delta") == 200);
        CHECK(api_daemon_stop() == 0);
    }
    /* a NUL byte in the config file is refused, naming the line */
    static const char nul[] = "open-compute\nport-file\0 = /tmp/x\n";
    write_bytes(path_of("config"), nul, sizeof nul - 1);
    st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 1002, "a NUL byte in the config: %d, want exit 2", st);
    CHECK(log_has("config line 2: a NUL byte") || log_has("line 2: a NUL byte"));
    if (st == 0)
        api_daemon_stop();
    teardown();
}

/* A key file that does not parse completely is refused whole (exit 2, file and line named);
 * CRLF line ends are accepted. */
static void keyfile_refused_whole(void)
{
    setup();
    static const struct {
        const char *what, *text;
        size_t len; /* 0: strlen */
        const char *says;
    } bad[] = {
        {"bad hex", READ_HASH " read reader\n" ADMIN_HASH "g admin op\n", 0, "line 2: the hash"},
        {"short hash", "8ed7a3cb498a69 read r\n", 0, "line 1: the hash"},
        {"unknown scope", READ_HASH " read,superuser reader\n", 0, "line 1: an unknown scope"},
        {"empty scope", READ_HASH " read,,admin reader\n", 0, "line 1: an empty scope"},
        {"no scope", READ_HASH "\n", 0, "line 1: no scopes"},
        {"duplicate hash", READ_HASH " read a\n\n" READ_HASH " admin b\n", 0, "line 3: this hash"},
        {"a fourth field", READ_HASH " read reader extra\n", 0, "line 1: more than three"},
        {"a quote in the name", READ_HASH " read re\"ader\n", 0, "line 1: the name"},
        {"a NUL byte", READ_HASH " read reader\n" ADMIN_HASH " ad\0min op\n", 2 * 65 + 21,
         "line 2: a NUL byte"},
        {"a stray carriage return", READ_HASH " read\rreader\n", 0, "line 1: a carriage return"},
        {"only comments", "# nothing\n\n", 0, "holds no key"},
    };
    const char *extra[] = {"--api-keys", path_of("keys"), NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_bytes(path_of("keys"), bad[i].text, bad[i].len ? bad[i].len : strlen(bad[i].text));
        int st = api_daemon_start(extra, NULL, "http");
        CHECKF(st == 1002, "a key file with %s: %d, want exit status 2", bad[i].what, st);
        CHECKF(log_has(bad[i].says), "a key file with %s: the message does not say '%s'",
               bad[i].what, bad[i].says);
        if (st == 0)
            api_daemon_stop();
    }
    write_text(path_of("keys"), "# crlf\r\n" READ_HASH " read reader\r\n" ADMIN_HASH
                                " admin operator # trailing comment\r\n");
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "a CRLF key file: %d", st);
    if (st == 0) {
        as(ADMIN_TOKEN);
        CHECK(status_of("GET", "/v1/summary") == 200);
        CHECK(api_daemon_stop() == 0);
    }
    teardown();
}

/* SIGHUP reloads the key file atomically: an added key works, a removed one gets 401, a
 * broken file keeps the set in use (and says why in one JSON line). */
static void keys_reload_on_sighup(void)
{
    setup();
    write_text(path_of("keys"), READ_HASH " read reader\n" ADMIN_HASH " admin operator\n");
    const char *extra[] = {"--api-keys", path_of("keys"), NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st != 0) {
        teardown();
        return;
    }
    as(NEW_TOKEN);
    CHECK(status_of("GET", "/v1/summary") == 401);
    write_text(path_of("keys"), READ_HASH " read reader\n" ADMIN_HASH " admin operator\n" NEW_HASH
                                          " admin rotated\n");
    CHECK(hup_and_wait("\"msg\":\"API keys reloaded\"", 1));
    long s = status_of("GET", "/v1/summary");
    CHECKF(s == 200, "a key added and SIGHUP: %ld, want 200", s);
    /* the old admin key is removed */
    write_text(path_of("keys"), READ_HASH " read reader\n" NEW_HASH " admin rotated\n");
    CHECK(hup_and_wait("\"msg\":\"API keys reloaded\"", 2));
    as(ADMIN_TOKEN);
    s = status_of("GET", "/v1/summary");
    CHECKF(s == 401, "a key removed and SIGHUP: %ld, want 401", s);
    /* a broken file: the set in use stays, the daemon stays up */
    write_text(path_of("keys"), NEW_HASH " admin rotated\n" READ_HASH " read,oops reader\n");
    CHECK(hup_and_wait("API keys not reloaded", 1));
    CHECK(log_has("line 2: an unknown scope"));
    as(READ_TOKEN);
    s = status_of("GET", "/v1/summary");
    CHECKF(s == 200, "after a broken reload the old set serves: %ld", s);
    as(NEW_TOKEN);
    CHECK(status_of("GET", "/v1/summary") == 200);
    /* a vanished file too */
    unlink(path_of("keys"));
    CHECK(hup_and_wait("API keys not reloaded", 2));
    CHECK(status_of("GET", "/v1/summary") == 200);
    CHECK(api_daemon_stop() == 0);
    teardown();
}

/* auth_find takes no lock: reloads race with lookups here, in the process. Two threads look
 * keys up and release them while the main thread swaps two key files 300 times: the key in
 * both is always found with its scope, the key only in the first file is found exactly in
 * that file's sets, and (under the sanitizer run) no set is read after it was freed. */
typedef struct {
    auth_table *t;
    int stop;
    long found, wrong;
} finder;

static void *find_loop(void *arg)
{
    finder *f = arg;
    while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
        const auth_key *k = auth_find(f->t, "Bearer " READ_TOKEN);
        if (k == NULL || !auth_allows(k, SCOPE_READ) || strcmp(auth_name(k), "reader") != 0)
            __atomic_add_fetch(&f->wrong, 1, __ATOMIC_RELAXED);
        else
            __atomic_add_fetch(&f->found, 1, __ATOMIC_RELAXED);
        auth_key_release(k);
        const auth_key *a = auth_find(f->t, "Bearer " ADMIN_TOKEN);
        if (a != NULL && strcmp(auth_name(a), "operator") != 0)
            __atomic_add_fetch(&f->wrong, 1, __ATOMIC_RELAXED);
        auth_key_release(a);
    }
    return NULL;
}

static void keys_reload_races_with_lookups(void)
{
    setup();
    char one[4096], two[4096], err[256];
    snprintf(one, sizeof one, "%s", path_of("keys1"));
    snprintf(two, sizeof two, "%s", path_of("keys2"));
    write_text(one, READ_HASH " read reader\n" ADMIN_HASH " admin operator\n");
    write_text(two, READ_HASH " read reader\n" NEW_HASH " admin rotated\n");
    auth_table t;
    auth_init(&t, 0.0, 0.0);
    CHECK(auth_reload(&t, one, NULL, err, sizeof err) == 0);
    finder f[2] = {{&t, 0, 0, 0}, {&t, 0, 0, 0}};
    pthread_t th[2];
    int started = 0;
    for (int i = 0; i < 2; i++)
        started += pthread_create(&th[i], NULL, find_loop, &f[i]) == 0;
    /* both threads looking keys up before the first reload, and all through the reloads */
    for (int w = 0; w < 2000 && started == 2 &&
                    (__atomic_load_n(&f[0].found, __ATOMIC_RELAXED) == 0 ||
                     __atomic_load_n(&f[1].found, __ATOMIC_RELAXED) == 0);
         w++)
        usleep(1000);
    for (int i = 0; i < 300; i++) {
        CHECK(auth_reload(&t, i % 2 ? two : one, NULL, err, sizeof err) == 0);
        if (i % 30 == 0)
            usleep(1000);
    }
    /* after the last reload (file two) the first file's admin key is gone at once */
    CHECK(auth_find(&t, "Bearer " ADMIN_TOKEN) == NULL);
    for (int i = 0; i < started; i++) {
        __atomic_store_n(&f[i].stop, 1, __ATOMIC_RELEASE);
        pthread_join(th[i], NULL);
        CHECKF(f[i].wrong == 0 && f[i].found > 0, "thread %d: %ld found, %ld wrong", i, f[i].found,
               f[i].wrong);
    }
    CHECK(started == 2);
    auth_free(&t);
    teardown();
}

/* Make a self-signed certificate and key for 127.0.0.1 (names relative to dir). */
static int make_cert(const char *cert, const char *key)
{
    return sh("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
              "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1",
              path_of(key), path_of(cert)) == 0;
}

/* Make cert.pem and key.pem (with second, also cert2.pem and key2.pem) and start a TLS
 * daemon on them with the extra flags (NULL-terminated, may be NULL): 1 when listening. */
static int start_tls(const char *const *more, int second)
{
    if (!make_cert("cert.pem", "key.pem") || (second && !make_cert("cert2.pem", "key2.pem"))) {
        CHECKF(0, "openssl could not make a certificate: is openssl installed?");
        return 0;
    }
    const char *extra[16] = {"--tls-cert", path_of("cert.pem"), "--tls-key", path_of("key.pem")};
    size_t n = 4;
    for (size_t i = 0; more && more[i] && n + 1 < 16; i++)
        extra[n++] = more[i];
    extra[n] = NULL;
    int st = api_daemon_start(extra, NULL, "https");
    CHECKF(st == 0, "dpbudgetd with TLS did not start (%d)", st);
    return st == 0;
}

static unsigned daemon_port(void)
{
    const char *b = strrchr(api_get_base(), ':');
    return b ? (unsigned)atoi(b + 1) : 0;
}

/* 1 when gnutls-cli completes a handshake with the daemon under this client priority. */
static int handshake(const char *priority)
{
    return sh("echo | timeout 10 gnutls-cli --insecure --priority '%s' -p %u 127.0.0.1 2>&1 | "
              "grep -q 'Handshake was completed'",
              priority, daemon_port()) == 0;
}

static const struct {
    const char *what, *priority;
    int ok;
} SUITES[] = {
    {"TLS 1.0", "NORMAL:-VERS-ALL:+VERS-TLS1.0", 0},
    {"TLS 1.1", "NORMAL:-VERS-ALL:+VERS-TLS1.1", 0},
    {"static RSA key exchange (TLS_RSA_WITH_AES_128_GCM_SHA256)",
     "NONE:+VERS-TLS1.2:+RSA:+AES-128-GCM:+AEAD:+SIGN-ALL:+COMP-NULL:+CTYPE-X509", 0},
    {"CBC with SHA-1 (TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA)",
     "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-CBC:-MAC-ALL:+SHA1", 0},
    {"TLS 1.2", "NORMAL:-VERS-ALL:+VERS-TLS1.2", 1},
    {"TLS 1.3", "NORMAL:-VERS-ALL:+VERS-TLS1.3", 1},
};

/* The default policy refuses old versions, static RSA and CBC-SHA1, and connects 1.2 and
 * 1.3; the same client against a daemon configured permissively (--tls-priorities)
 * completes every one of those handshakes, so the refusals are the server's. */
static void tls_policy(void)
{
    setup();
    if (sh("command -v gnutls-cli >/dev/null") != 0) {
        CHECKF(0, "gnutls-cli (gnutls-bin) is needed: run scripts/deps.sh");
        teardown();
        return;
    }
    for (int permissive = 0; permissive < 2; permissive++) {
        const char *loose[] = {"--tls-priorities",
                               "NORMAL:+VERS-TLS1.0:+VERS-TLS1.1:+RSA:+SHA1:+AES-128-CBC", NULL};
        if (!start_tls(permissive ? loose : NULL, 0))
            continue;
        for (size_t i = 0; i < sizeof SUITES / sizeof SUITES[0]; i++) {
            int ok = handshake(SUITES[i].priority);
            int want = permissive ? 1 : SUITES[i].ok;
            CHECKF(ok == want, "%s against the %s policy: %s, want %s", SUITES[i].what,
                   permissive ? "permissive" : "default", ok ? "connected" : "refused",
                   want ? "connected" : "refused");
        }
        CHECK(api_daemon_stop() == 0);
    }
    /* a priority string GnuTLS cannot parse stops the daemon at start */
    const char *badp[] = {
        "--tls-cert",       path_of("cert.pem"),     "--tls-key", path_of("key.pem"),
        "--tls-priorities", "NORMAL:+NO-SUCH-THING", NULL};
    int st = api_daemon_start(badp, NULL, "https");
    CHECKF(st == 1002, "a bad --tls-priorities: %d, want exit status 2", st);
    if (st == 0)
        api_daemon_stop();
    teardown();
}

/* A half-sent ClientHello is cut off at --tls-handshake-timeout, not the 30 s idle timeout. */
static void tls_handshake_deadline(void)
{
    setup();
    const char *extra[] = {"--tls-handshake-timeout", "1", NULL};
    if (!start_tls(extra, 0)) {
        teardown();
        return;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)daemon_port());
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int connected = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    CHECK(connected);
    if (connected) {
        /* a TLS record header announcing 200 bytes of ClientHello, then 4 of them */
        static const unsigned char part[] = {0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00, 0xc4};
        send(fd, part, sizeof part, MSG_NOSIGNAL);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        struct timeval tv = {6, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        char buf[64];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        int e = errno;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        CHECKF(n == 0 || (n < 0 && e == ECONNRESET),
               "a half-sent handshake was not closed: recv %zd (%s) after %.1f s", n,
               n < 0 ? strerror(e) : "", dt);
    }
    if (fd >= 0)
        close(fd);
    /* a complete client is not affected */
    api_set_ca(path_of("cert.pem"));
    CHECK(status_of("GET", "/healthz") == 200);
    CHECK(api_daemon_stop() == 0);
    teardown();
}

/* 1 when the daemon serves the certificate in file (SHA-256 fingerprints compared). */
static int serves(const char *file)
{
    char got[160], want[160];
    snprintf(got, sizeof got, "%s", path_of("got"));
    snprintf(want, sizeof want, "%s", path_of("want"));
    return sh("echo | timeout 10 openssl s_client -connect 127.0.0.1:%u 2>/dev/null | "
              "openssl x509 -noout -fingerprint -sha256 >%s && "
              "openssl x509 -noout -fingerprint -sha256 -in %s >%s && cmp -s %s %s",
              daemon_port(), got, path_of(file), want, got, want) == 0;
}

/* SIGHUP serves a new certificate to new handshakes (fingerprints compared); a mismatched
 * pair keeps the one in use. */
static void tls_cert_reload_on_sighup(void)
{
    setup();
    if (!start_tls(NULL, 1)) {
        teardown();
        return;
    }
    CHECK(serves("cert.pem"));
    /* a mismatched pair (new certificate, old key): refused, the old one still served */
    sh("cp %s %s", path_of("cert2.pem"), path_of("cert.pem.new"));
    sh("mv %s %s", path_of("cert.pem.new"), path_of("cert.pem"));
    CHECK(hup_and_wait("TLS certificate not reloaded", 1));
    CHECK(log_has("is not the key of the (first) certificate"));
    CHECK(!serves("cert.pem"));
    /* the matching key: the new certificate is served after SIGHUP */
    sh("cp %s %s", path_of("key2.pem"), path_of("key.pem"));
    CHECK(hup_and_wait("\"msg\":\"TLS certificate reloaded\"", 1));
    CHECKF(serves("cert.pem"), "after SIGHUP the served certificate is not the new one");
    api_set_ca(path_of("cert.pem"));
    CHECK(status_of("GET", "/healthz") == 200);
    CHECK(api_daemon_stop() == 0);
    teardown();
}

/* --healthcheck, with the daemon's own options: 0 against a plain and a TLS daemon, 1 with
 * one line of reason against a stopped one or a certificate that is not the served one. */
static void healthcheck_probe(void)
{
    setup();
    if (!make_cert("cert.pem", "key.pem") || !make_cert("other.pem", "otherkey.pem")) {
        CHECKF(0, "openssl could not make certificates");
        teardown();
        return;
    }
    const char *bin = daemon_binary();
    char out[160];
    snprintf(out, sizeof out, "%s", path_of("probe.out"));
    int st = api_daemon_start(NULL, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st == 0) {
        unsigned port = daemon_port();
        int rc = sh("%s --healthcheck --port %u >%s 2>&1", bin, port, out);
        CHECKF(rc == 0, "--healthcheck against a plain daemon: exit %d", rc);
        /* the port from the environment, as an orchestrator would set it */
        rc = sh("DPBUDGET_PORT=%u %s --healthcheck >%s 2>&1", port, bin, out);
        CHECKF(rc == 0, "--healthcheck with DPBUDGET_PORT: exit %d", rc);
        CHECK(api_daemon_stop() == 0);
        rc = sh("%s --healthcheck --port %u >%s 2>&1", bin, port, out);
        CHECKF(rc == 1, "--healthcheck against a stopped daemon: exit %d, want 1", rc);
        CHECK(sh("grep -q '^dpbudgetd: unhealthy: cannot connect' %s && test $(wc -l <%s) -eq 1",
                 out, out) == 0);
    }
    /* TLS: the same options as the daemon, through a config file */
    char cfg[512];
    snprintf(cfg, sizeof cfg, "tls-cert = %s\ntls-key = %s\n", path_of("cert.pem"),
             path_of("key.pem"));
    write_text(path_of("config"), cfg);
    const char *extra[] = {"--config", path_of("config"), NULL};
    st = api_daemon_start(extra, NULL, "https");
    CHECKF(st == 0, "dpbudgetd with TLS did not start (%d)", st);
    if (st == 0) {
        unsigned port = daemon_port();
        int rc = sh("%s --healthcheck --config %s --port %u >%s 2>&1", bin, path_of("config"), port,
                    out);
        CHECKF(rc == 0, "--healthcheck against a TLS daemon: exit %d", rc);
        /* plain HTTP against the TLS port is not healthy */
        rc = sh("%s --healthcheck --port %u >%s 2>&1", bin, port, out);
        CHECKF(rc == 1, "a plain probe of a TLS daemon: exit %d, want 1", rc);
        /* a certificate that is not the served one: refused (pinned) */
        rc = sh("%s --healthcheck --tls-cert %s --tls-key %s --port %u >%s 2>&1", bin,
                path_of("other.pem"), path_of("otherkey.pem"), port, out);
        CHECKF(rc == 1, "--healthcheck pinning another certificate: exit %d, want 1", rc);
        CHECK(sh("grep -q 'is not the one in --tls-cert' %s", out) == 0);
        CHECK(api_daemon_stop() == 0);
    }
    teardown();
}

const tl_test OPERATOR_TESTS[] = {
    TL_T(keyfile_long_comment_stays_comment),
    TL_T(config_long_comment_stays_comment),
    TL_T(pld_plan_memory_option),
    TL_T(keyfile_refused_whole),
    TL_T(keys_reload_on_sighup),
    TL_T(keys_reload_races_with_lookups),
    TL_T(tls_policy),
    TL_T(tls_handshake_deadline),
    TL_T(tls_cert_reload_on_sighup),
    TL_T(healthcheck_probe),
};
const size_t OPERATOR_NTESTS = sizeof OPERATOR_TESTS / sizeof OPERATOR_TESTS[0];
