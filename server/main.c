/*
 * main.c - dpbudgetd: the usage text, the start-up (options through config.h, the access
 * checks, the ledger: the data-directory lock or the database with --ledger-url), the HTTP
 * server, and the wait for signals: SIGHUP reloads the API keys and the TLS certificate,
 * SIGTERM and SIGINT stop as an orchestrator expects (drain: readiness fails at once, the
 * daemon serves on for --shutdown-grace after SIGTERM, then stops accepting and finishes
 * what is in flight within --shutdown-deadline, syncs the ledger and exits 0).
 * --healthcheck probes a running daemon, --verify checks a data directory offline.
 *
 * May call: config.h, daemonlog.h, reqlog.h (reqlog_time), http.h (http_start, http_stop),
 * auth.h, tls.h, healthcheck.h, admin.h, metrics.h, textfile.h, and the ledger and PLD APIs
 * of core.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>
#include <jansson.h>

#include "../core/common/clock.h"
#include "../core/dp/pld.h"
#include "../core/ledger/ledger.h"
#include "../core/ledger/store.h"
#include "admin.h"
#include "app.h"
#include "config.h"
#include "daemonlog.h"
#include "metrics.h"
#include "auth.h"
#include "healthcheck.h"
#include "http.h"
#include "reqlog.h"
#include "routes.h"
#include "textfile.h"
#include "tls.h"

static const char USAGE[] =
    "Usage: dpbudgetd [OPTIONS]\n"
    "       dpbudgetd migrate|copy-ledger|compare-ledgers ... (dpbudgetd migrate --help)\n"
    "       dpbudgetd keygen FILE  (a new Ed25519 key for --signing-key; prints its key_id)\n"
    "A privacy-budget service: differential-privacy accounting over HTTP/JSON.\n"
    "\n"
    "Options:\n"
    "  --listen ADDR        address to listen on, IPv4 or IPv6 (default 127.0.0.1); any\n"
    "                       address but loopback needs --api-keys\n"
    "  --port N             TCP port, 0 for an ephemeral one (default 8080)\n"
    "  --port-file PATH     write the bound port number to PATH once listening\n"
    "  --threads N          HTTP worker threads (probes, ledger reads, light\n"
    "                       computations), 0 = one per CPU (default 0); ledger writes\n"
    "                       (rounds, client puts) run on 8 threads of their own\n"
    "  --max-body BYTES     largest request body accepted, else 413 (default 65536)\n"
    "  --max-bulk-body BYTES  largest body of the calls that carry lists of clients\n"
    "                       (clients:batch, eligibility, rounds, commit), if larger than\n"
    "                       --max-body (default 4194304)\n"
    "  --conn-timeout SECS  close connections idle this long (default 30)\n"
    "  --request-timeout SECS  drop a request whose body takes longer than this to arrive\n"
    "                       (slow senders; default 60)\n"
    "  --max-connections N  concurrent connections (default 1024)\n"
    "  --max-connections-per-ip N  concurrent connections from one client address, 0 = no\n"
    "                       cap (default 256); more are refused at once\n"
    "  --header-timeout SECS  a request's line and headers must arrive whole within this\n"
    "                       (from the connection, or from the request line on a kept-alive\n"
    "                       one; with TLS the first request has --tls-handshake-timeout),\n"
    "                       however steadily they drip; else the connection is closed\n"
    "                       (slowloris; default 5)\n"
    "  --max-header-bytes BYTES  largest request line + headers, else 431 (default 16384,\n"
    "                       at most 65536); each open connection holds twice this\n"
    "                       (at least 32 KiB) for its head\n"
    "  --compute-threads N  threads for the computations (/v1/delta, /v1/epsilon,\n"
    "                       /v1/calibrate, /v1/curve, /v1/rdp, /v1/proactive), apart\n"
    "                       from the --threads that serve probes and the ledger; 0 =\n"
    "                       one per CPU (default 0). They run at nice +10 and, when the\n"
    "                       daemon may use two CPUs or more, on all but the first, left\n"
    "                       to the probes and the ledger. Closed-form answers (thm41,\n"
    "                       gdp_exact, gdp_clt, rdp, a cached shuffled-epoch model) skip\n"
    "                       the pool\n"
    "  --compute-queue N    computations that may wait for a compute thread (default 16);\n"
    "                       beyond that: 503 overloaded with Retry-After\n"
    "  --compute-deadline SECS  stop a computation that runs longer than this: 422\n"
    "                       compute_deadline_exceeded (default 30; decimals allowed)\n"
    "  --ledger-deadline SECS  stop a ledger request's computation (the PLDs of an\n"
    "                       eligibility page, of a round's admissions, of a commit's new\n"
    "                       spends: all computed before the ledger's lock) that runs longer\n"
    "                       than this: 422 compute_deadline_exceeded, nothing changed\n"
    "                       (default 30; decimals allowed)\n"
    "  --ledger-max-pld-evals N  the most PLD evaluations one ledger request (an\n"
    "                       eligibility page, a round, a commit, a batch of clients) may\n"
    "                       make: over it 422 ledger_cost_exceeded, nothing changed\n"
    "                       (default 10000)\n"
    "  --answer-memory MIB  memory that answers waiting to be read may hold, all together\n"
    "                       (answers of up to 16 KiB are not counted); over it an answer\n"
    "                       is refused: 503 answer_memory_exhausted with Retry-After\n"
    "                       (1 to 1048576, default 256)\n"
    "  --data-dir DIR       the ledger's data directory (default ./dpbudget-data);\n"
    "                       unused with --ledger-url (giving both is refused: exit 2)\n"
    "  --ledger-url URL     keep the ledger in PostgreSQL (postgresql://USER@HOST/DB, libpq's\n"
    "                       syntax) instead of --data-dir: any number of replicas share\n"
    "                       it and the daemon keeps no ledger files; the schema is\n"
    "                       migrated at start. Better set as DPBUDGET_LEDGER_URL, with the\n"
    "                       password in PGPASSWORD or a ~/.pgpass file (libpq reads them):\n"
    "                       a password is never printed, but a command line is visible\n"
    "                       to every local user. While the database cannot be reached,\n"
    "                       ledger requests get 503 ledger_unavailable with Retry-After\n"
    "                       and /readyz 503; the daemon reconnects by itself. A database\n"
    "                       that stops answering is noticed within 3 s: from then on\n"
    "                       ledger requests are answered 503 at once until it answers\n"
    "  --ledger-pool N      connections to the database at most, one of them for appends\n"
    "                       (2 to 1000, default 4)\n"
    "  --default-budget E,D create unknown clients on first use with budget (E, D)\n"
    "                       (default: off; unknown clients are refused)\n"
    "  --snapshot-every N   log records between ledger snapshots (default 100000)\n"
    "  --max-named-events N  named events (PUT /v1/events/{name}) the ledger takes at most\n"
    "                       (1 to 10000000, default 10000)\n"
    "  --max-named-event-bytes BYTES  their stored encodings' bytes all together at most\n"
    "                       (1024 to 17179869184, default 67108864)\n"
    "  --reservation-ttl SECS  how long a two-phase round's reservation is held when its\n"
    "                       request names no reservation_ttl_seconds; then it expires and\n"
    "                       its clients' budget is released (1 to 86400, default 3600)\n"
    "  --max-reserved-per-key N  client-reservations one API key may hold at once (the\n"
    "                       admitted clients of its held reservations, summed); past it\n"
    "                       a reservation gets 409 reservation_quota_exceeded (0 to\n"
    "                       1000000000, default 0: no cap)\n"
    "  --no-pld-refine      do not compute pld clients' PLD spends in the background (a\n"
    "                       pld client then shows its rdp value until near its budget)\n"
    "  --pld-plan-memory MIB  memory for the FFT plans the PLD accountant keeps, planned\n"
    "                       at start, smallest transform sizes first (0 to 65536, default\n"
    "                       192: every size up to 2^20, about 140 MiB resident; 0: none\n"
    "                       kept, each computation plans its own, 1-20 ms a size)\n"
    "  --pld-kept-memory MIB  memory for the kept compositions of pld clients past their\n"
    "                       rdp bound (about 17 KiB each; the least recently used are\n"
    "                       dropped past it and rebuilt from the log when next needed;\n"
    "                       0 to 1048576, default 64; 0: none kept, every PLD spend\n"
    "                       composed from scratch)\n"
    "  --no-ledger          serve the compute API only\n"
    "  --api-keys FILE      API keys: lines '<sha256 hex of token> <scopes> [name]', scopes\n"
    "                       a comma list of read, charge, admin (make one with\n"
    "                       printf %s \"$TOKEN\" | sha256sum); with keys, every endpoint but\n"
    "                       /healthz, /readyz, /metrics, /openapi.yaml and the dashboard\n"
    "                       (/ and /ui/) needs a key sent as 'Authorization: Bearer TOKEN';\n"
    "                       the whole file must parse or it is refused (at start: exit 2;\n"
    "                       on SIGHUP: the keys in use stay); SIGHUP reloads it\n"
    "  --open-compute       leave the compute endpoints (/v1/delta, /v1/epsilon,\n"
    "                       /v1/calibrate, /v1/curve, /v1/rdp, /v1/proactive,\n"
    "                       /v1/accountants) open\n"
    "                       when keys are configured; ledger endpoints never are\n"
    "  --rate-limit RPS     requests per second per API key, 0 = unlimited (default 0);\n"
    "                       over it: 429 with Retry-After\n"
    "  --tls-cert FILE      serve HTTPS with this PEM certificate (chain) ...\n"
    "  --tls-key FILE       ... and this PEM private key (both or neither); SIGHUP reloads\n"
    "                       both (new handshakes get the new certificate)\n"
    "  --tls-priorities STR GnuTLS priority string (default: TLS 1.2 and 1.3 only,\n"
    "                       ECDHE/DHE key exchange with AES-GCM or ChaCha20-Poly1305, the\n"
    "                       server's order:\n"
    "                       " TLS_DEFAULT_PRIORITIES ")\n"
    "  --tls-handshake-timeout SECS  close a TLS connection that has not finished its\n"
    "                       handshake and sent its first request's headers within SECS\n"
    "                       (default 5)\n"
    "  --shutdown-grace SECS  after SIGTERM, keep serving this long (default 5; decimals\n"
    "                       allowed) while /readyz already answers 503 shutting_down,\n"
    "                       so that load balancers take the daemon out first; 0 for\n"
    "                       tests and development. SIGINT skips the grace\n"
    "  --shutdown-deadline SECS  then stop accepting connections and give the requests in\n"
    "                       flight (computations included) this long to be answered\n"
    "                       (default 20); the ledger is synced and the daemon exits 0.\n"
    "                       A second SIGTERM or SIGINT stops at once (computations\n"
    "                       still running: 503)\n"
    "  --no-request-log     do not log one JSON line per request\n"
    "  --cors-origin ORIGIN  let browser pages of ORIGIN (exactly scheme://host[:port],\n"
    "                       e.g. https://dash.example.org) call the API: CORS headers for\n"
    "                       that origin only; repeatable, or a comma list (at most 16).\n"
    "                       Default: none, no Access-Control-* header is ever sent\n"
    "  --signing-key FILE   sign tree heads (GET /v1/log/sth) and charge receipts with the\n"
    "                       Ed25519 key of FILE's first line (dpbudgetd keygen FILE makes\n"
    "                       one); later lines list retired keys (GET /v1/log/keys). Without\n"
    "                       it nothing is signed: /v1/log/sth answers 404 signing_off\n"
    "  --config FILE        read options from FILE: lines 'name = value' (or 'name' for\n"
    "                       a switch), names as above without the dashes\n"
    "  --healthcheck        probe the running daemon (the same options, environment and\n"
    "                       config file: address, port or --port-file, TLS) with GET\n"
    "                       /healthz; with TLS its certificate must be the --tls-cert file's;\n"
    "                       exit 0 on 200, else 1 with a one-line reason\n"
    "  --verify DIR         check a ledger data directory offline (on a copy: DIR is not\n"
    "                       modified), print its summary, exit 0 if sound, 1 if damaged;\n"
    "                       every logged record (archive/ too) is checked against its\n"
    "                       leaf in the log's Merkle tree and a changed one named\n"
    "  --help               print this help and exit\n"
    "  --version            print the version and exit\n"
    "\n"
    "Every option can also be set in the environment as DPBUDGET_NAME (e.g. DPBUDGET_PORT,\n"
    "DPBUDGET_API_KEYS, DPBUDGET_CONFIG; switches take 1 or 0). Precedence: command line,\n"
    "then environment, then --config file, then the defaults above. Files read (keys,\n"
    "config, PEM) are read whole: no line is too long, CRLF line ends are accepted, a NUL\n"
    "byte or other control character is refused with the file and line.\n"
    "\n"
    "The API is described by openapi.yaml, also served at GET /openapi.yaml.\n";

/* Copy DIR/name to TMP/name if it exists. 0 on success or absence. */
static int copy_if_present(const char *dir, const char *tmp, const char *name)
{
    char from[PATH_MAX], to[PATH_MAX];
    snprintf(from, sizeof from, "%s/%s", dir, name);
    snprintf(to, sizeof to, "%s/%s", tmp, name);
    FILE *in = fopen(from, "rb");
    if (in == NULL)
        return errno == ENOENT ? 0 : -1;
    FILE *out = fopen(to, "wb");
    int rc = out ? 0 : -1;
    char buf[1 << 16];
    size_t n;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            rc = -1;
    if (ferror(in))
        rc = -1;
    fclose(in);
    if (out && fclose(out) != 0)
        rc = -1;
    return rc;
}

/* ---- start-up: what is wrong with an unusable data directory ---- */

static const char *errno_name(int e)
{
    switch (e) {
    case EACCES:
        return "EACCES";
    case EPERM:
        return "EPERM";
    case EROFS:
        return "EROFS";
    case ENOTDIR:
        return "ENOTDIR";
    case EISDIR:
        return "EISDIR";
    case ENOENT:
        return "ENOENT";
    case ENOSPC:
        return "ENOSPC";
    case EDQUOT:
        return "EDQUOT";
    case ELOOP:
        return "ELOOP";
    case ENAMETOOLONG:
        return "ENAMETOOLONG";
    case EIO:
        return "EIO";
    case EWOULDBLOCK:
        return "EWOULDBLOCK";
    case ENOLCK:
        return "ENOLCK";
    default:
        return "errno";
    }
}

/* What to do about errno e on path (a generic sentence when nothing better is known). */
static const char *errno_hint(int e)
{
    switch (e) {
    case EACCES:
    case EPERM:
        return "the daemon's user may not create or open it: fix the owner or mode of the data "
               "directory (or run the daemon as its owner)";
    case EROFS:
        return "the file system is mounted read-only: mount it read-write, or choose another "
               "--data-dir";
    case ENOTDIR:
        return "a component of the path is a file, not a directory: choose another --data-dir "
               "or move the file away";
    case EISDIR:
        return "a directory is where the daemon keeps a file: remove it (the daemon creates its "
               "files itself)";
    case ENOENT:
        return "a parent directory does not exist (or a symbolic link dangles): create it or fix "
               "the link";
    case ENOSPC:
    case EDQUOT:
        return "the file system is full: free space, then start again";
    case ELOOP:
        return "too many symbolic links: fix the links on the path";
    default:
        return "fix the path, or choose another --data-dir";
    }
}

/* One start-up error line (JSON): what is wrong, the path, the errno and what to do. */
static void startup_error(const char *msg, const char *dir, const char *path, int e,
                          const char *hint)
{
    char ts[40], sdir[PATH_MAX], spath[PATH_MAX];
    reqlog_time(ts, sizeof ts);
    /* a connection string given as --data-dir is shown without its secrets (a path is
     * shown as it is) */
    admin_redact_url(dir, sdir, sizeof sdir);
    admin_redact_url(path, spath, sizeof spath);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "ts", ts, "level", "error", "msg", msg,
                          "data_dir", sdir, "path", spath);
    if (o && e) {
        json_object_set_new(o, "errno", json_string(errno_name(e)));
        json_object_set_new(o, "detail", json_string(strerror(e)));
    }
    if (o)
        json_object_set_new(o, "hint", json_string(hint ? hint : errno_hint(e)));
    daemonlog_json(o, msg);
}

/* Create (if missing) and lock the data directory. The lock fd (kept open while the daemon
 * runs: one daemon per directory, a second would interleave its log with ours), or -1 after
 * saying what is wrong. */
static int open_data_dir(const char *dir)
{
    char lock_path[PATH_MAX];
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        startup_error("cannot create the data directory", dir, dir, e, NULL);
        return -1;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        int e = errno;
        char target[PATH_MAX];
        ssize_t n = readlink(dir, target, sizeof target - 1);
        if (n >= 0) {
            target[n] = '\0';
            char msg[PATH_MAX + 96];
            snprintf(msg, sizeof msg, "the data directory is a symbolic link to %s, which %s",
                     target, e == ENOENT ? "does not exist" : "cannot be reached");
            startup_error(msg, dir, dir, e, "create the link's target, or fix the link");
        } else {
            startup_error("cannot reach the data directory", dir, dir, e, NULL);
        }
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        startup_error("the data directory exists but is not a directory", dir, dir, ENOTDIR,
                      "choose another --data-dir, or move the file away");
        return -1;
    }
    snprintf(lock_path, sizeof lock_path, "%s/LOCK", dir);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        startup_error("cannot open the lock file of the data directory", dir, lock_path, e, NULL);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EWOULDBLOCK)
            startup_error("the data directory is in use by another dpbudgetd", dir, lock_path, 0,
                          "stop the other daemon, or give this one another --data-dir");
        else
            startup_error("cannot lock the data directory", dir, lock_path, e,
                          "the file system may not support locks (flock): use a local file "
                          "system for --data-dir");
        close(fd);
        return -1;
    }
    return fd;
}

/* Open the ledger in the database of lo->ledger_url (shown: the url without its password):
 * 0, or -1 after one JSON line saying what is wrong and what to do. */
static int open_shared_ledger(const ledger_options *lo, const char *shown, ledger **out)
{
    dpb_error err = {0};
    if (ledger_open(lo, out, &err) == DPB_OK)
        return 0;
    admin_scrub(err.detail, lo->ledger_url);
    char ts[40];
    reqlog_time(ts, sizeof ts);
    const char *hint =
        err.status == DPB_EUNAVAILABLE
            ? "the database cannot be reached: check the url's host, port, database and user, "
              "the password (PGPASSWORD or ~/.pgpass), that PostgreSQL is up and accepts "
              "connections from here; the daemon exits so that its supervisor starts it again"
        : err.status == DPB_ECORRUPT
            ? "the database holds a schema or records newer than this dpbudgetd knows (or "
              "damaged ones): run the newer version, or restore the database from a backup"
            : "fix what the detail names, then start again";
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "ts", ts, "level", "error", "msg",
                          "cannot open the ledger", "ledger_url", shown, "status",
                          dpb_strstatus(err.status), "detail", err.detail, "hint", hint);
    daemonlog_json(o, err.detail);
    *out = NULL;
    return -1;
}

/* --verify's verdict that DIR is damaged, with the detail found in its copy tmp: naming the
 * original directory, not the copy. */
static void say_damaged(const char *dir, const char *tmp, const char *detail)
{
    const char *at = strstr(detail, tmp);
    if (at)
        fprintf(stderr, "dpbudgetd: %s is damaged: %.*s%s%s\n", dir, (int)(at - detail), detail,
                dir, at + strlen(tmp));
    else
        fprintf(stderr, "dpbudgetd: %s is damaged: %s\n", dir, detail);
}

/* --verify DIR: recover a copy of DIR exactly as start-up would, report, leave DIR alone. */
static int verify(const char *dir)
{
    char tmp[] = "/tmp/dpbudget-verify-XXXXXX", f[PATH_MAX];
    if (mkdtemp(tmp) == NULL) {
        fprintf(stderr, "dpbudgetd: --verify: cannot make a temporary directory: %s\n",
                strerror(errno));
        return 1;
    }
    int rc = 1;
    /* the archive of cut records is only read: linked, not copied */
    char arch[PATH_MAX], link_to[PATH_MAX];
    snprintf(arch, sizeof arch, "%s/archive", dir);
    snprintf(link_to, sizeof link_to, "%s/archive", tmp);
    struct stat asb;
    if (copy_if_present(dir, tmp, "wal.log") != 0 || copy_if_present(dir, tmp, "snapshot") != 0 ||
        copy_if_present(dir, tmp, "tree.nodes") != 0 ||
        copy_if_present(dir, tmp, "tree.snap") != 0 ||
        (stat(arch, &asb) == 0 && (realpath(arch, f) == NULL || symlink(f, link_to) != 0))) {
        fprintf(stderr, "dpbudgetd: --verify: cannot read %s: %s\n", dir, strerror(errno));
        goto out;
    }
    ledger_options o = {tmp, NULL, 0, 0.0, 0.0, 1000000000, 0, 0, NULL, 0, 0, 0};
    ledger *l;
    dpb_error err = {0};
    if (ledger_open(&o, &l, &err) != DPB_OK) {
        say_damaged(dir, tmp, err.detail);
        goto out;
    }
    uint64_t checked = 0;
    if (ledger_log_verify(l, &checked, &err) != DPB_OK) { /* every record against its leaf */
        say_damaged(dir, tmp, err.detail);
        ledger_close_nosnapshot(l);
        goto out;
    }
    ledger_summary s;
    ledger_get_summary(l, &s);
    /* a torn tail is dropped at start-up: say how much (the copy was truncated, not DIR) */
    struct stat before, after;
    snprintf(f, sizeof f, "%s/wal.log", dir);
    long long dropped = 0;
    if (stat(f, &before) == 0) {
        snprintf(f, sizeof f, "%s/wal.log", tmp);
        if (stat(f, &after) == 0 && after.st_size < before.st_size)
            dropped = (long long)(before.st_size - after.st_size);
    }
    printf("{\"data_dir\":\"%s\",\"sound\":true,\"clients\":%llu,\"rounds\":%llu,"
           "\"active\":%llu,\"exhausted\":%llu,\"uncertified\":%llu,\"stuck\":%llu,"
           "\"torn_tail_bytes\":%lld,\"log_records_checked\":%llu}\n",
           dir, (unsigned long long)s.clients, (unsigned long long)s.rounds,
           (unsigned long long)s.active, (unsigned long long)s.exhausted,
           (unsigned long long)s.uncertified, (unsigned long long)s.stuck, dropped,
           (unsigned long long)checked);
    if (dropped)
        fprintf(stderr,
                "dpbudgetd: %s/wal.log ends in %lld bytes that are not a complete record (a write "
                "cut short, or damage to the last record): start-up drops them\n",
                dir, dropped);
    ledger_close_nosnapshot(l);
    rc = 0;
out:
    for (const char *const *n =
             (const char *const[]){"wal.log", "snapshot", "wal.log.tmp", "snapshot.tmp",
                                   "tree.nodes", "tree.snap", "tree.snap.tmp", "archive", NULL};
         *n; n++) {
        snprintf(f, sizeof f, "%s/%s", tmp, *n);
        if (unlink(f) != 0)
            rmdir(f); /* archive/, made by the copy's start-up when DIR had none */
    }
    rmdir(tmp);
    return rc;
}

/* The largest PEM file read (far above real ones; over it: refused). */
#define PEM_CAP ((size_t)1 << 20)

/* 1 for 127.0.0.0/8 and ::1. */
static int is_loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0;
}

/* A whole PEM file (malloc'ed, NUL-terminated), or NULL with the reason in err. */
static char *read_pem(const char *opt, const char *path, char *err, size_t errlen)
{
    textfile f;
    char why[384];
    if (textfile_read(&f, path, PEM_CAP, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", opt, why);
        return NULL;
    }
    if (strlen(f.buf) != f.len || strstr(f.buf, "-----BEGIN") == NULL) {
        snprintf(err, errlen, "%s %s: not a PEM file (no '-----BEGIN', or a NUL byte)", opt, path);
        textfile_release(&f);
        return NULL;
    }
    return f.buf; /* f.line is NULL: nothing else to release */
}

/* Read the TLS certificate and key files and make them the served credential: 0, or -1
 * with the reason in err (the previous credential stays). */
static int load_tls(const config_settings *st, char *err, size_t errlen)
{
    char why[384];
    char *cert = read_pem("--tls-cert", st->tls_cert, err, errlen);
    char *key = cert ? read_pem("--tls-key", st->tls_key, err, errlen) : NULL;
    int rc = -1;
    if (cert && key) {
        rc = tls_load_credentials(cert, key, why, sizeof why);
        if (rc != 0)
            snprintf(err, errlen, "--tls-cert %s, --tls-key %s: %s", st->tls_cert, st->tls_key,
                     why);
    }
    if (key)
        memset(key, 0, strlen(key)); /* the private key does not linger in freed memory */
    free(cert);
    free(key);
    return rc;
}

/* SIGHUP: reload the API keys and the TLS credential, each atomically (a failed one keeps
 * what is in use) with one JSON log line each. */
static void reload(const config_settings *st, auth_table *keys, int tls)
{
    char err[512], msg[160];
    if (st->api_keys == NULL && !tls)
        daemonlog_line("info", "SIGHUP: nothing to reload", "no --api-keys and no TLS");
    if (st->api_keys) {
        size_t n = 0;
        if (auth_reload(keys, st->api_keys, &n, err, sizeof err) == 0) {
            snprintf(msg, sizeof msg, "%zu keys from %s", n, st->api_keys);
            daemonlog_line("info", "API keys reloaded", msg);
        } else {
            daemonlog_line("error", "API keys not reloaded: the keys in use stay", err);
        }
    }
    if (tls) {
        if (load_tls(st, err, sizeof err) == 0)
            daemonlog_line("info", "TLS certificate reloaded", st->tls_cert);
        else
            daemonlog_line("error", "TLS certificate not reloaded: the one in use stays", err);
    }
}

/* --healthcheck: the port from --port, or from --port-file when the port is 0. */
static int run_healthcheck(const config_settings *st)
{
    unsigned port = st->cfg.port;
    char why[512];
    if (port == 0 && st->port_file) {
        FILE *f = fopen(st->port_file, "r");
        if (f == NULL || fscanf(f, "%u", &port) != 1 || port == 0 || port > 65535)
            port = 0;
        if (f)
            fclose(f);
    }
    if (port == 0) {
        fprintf(stderr, "dpbudgetd: unhealthy: no port to probe (--port 0 and no readable "
                        "--port-file)\n");
        return 1;
    }
    if ((st->tls_cert == NULL) != (st->tls_key == NULL)) {
        fprintf(stderr, "dpbudgetd: unhealthy: --tls-cert and --tls-key go together\n");
        return 1;
    }
    if (healthcheck(st->cfg.listen_addr, port, st->tls_cert, 5.0, why, sizeof why) != 0) {
        fprintf(stderr, "dpbudgetd: unhealthy: %s\n", why);
        return 1;
    }
    printf("dpbudgetd: healthy: %s\n", why);
    return 0;
}

/* The first pass over the command line: --help, --version and --verify are answered at once
 * (1, with the exit code in *rc); else 0, with the --config file (the environment's
 * DPBUDGET_CONFIG unless the command line names one) and whether to --healthcheck. */
static int first_pass(int argc, char **argv, const char **config, int *probe, int *rc)
{
    *config = getenv("DPBUDGET_CONFIG");
    *probe = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(USAGE, stdout);
            *rc = 0;
            return 1;
        }
        if (strcmp(a, "--version") == 0) {
            printf("dpbudgetd %s\n", DPB_VERSION);
            *rc = 0;
            return 1;
        }
        if (strcmp(a, "--verify") == 0 && i + 1 < argc) {
            *rc = verify(argv[i + 1]);
            return 1;
        }
        if (strcmp(a, "--config") == 0 && i + 1 < argc)
            *config = argv[++i];
        else if (strcmp(a, "--healthcheck") == 0)
            *probe = 1;
    }
    return 0;
}

/* The settings that exclude each other, then access: the API keys (loaded into keys, which
 * cfg->auth then names) or a loopback address, and TLS (loaded, cfg->tls set). 0, or 2 after
 * a message. */
static int check_settings(config_settings *st, auth_table *keys, http_config *cfg)
{
    if (st->lo.ledger_url && st->data_dir_from[0]) {
        fprintf(stderr,
                "dpbudgetd: --ledger-url and --data-dir (%s) exclude each other: with "
                "--ledger-url the ledger lives in the database and the daemon keeps no ledger "
                "files; drop one of them\n",
                st->data_dir_from);
        return 2;
    }
    if (st->lo.ledger_url && !st->use_ledger) {
        fprintf(stderr, "dpbudgetd: --ledger-url and --no-ledger exclude each other\n");
        return 2;
    }
    if (st->lo.ledger_url)
        st->lo.dir = NULL;
    *cfg = st->cfg;
    cfg->answer_memory = st->answer_memory_mib << 20;
    auth_init(keys, st->rate, st->rate < 1.0 ? 1.0 : st->rate);
    if (st->api_keys) {
        char msg[512];
        if (access(st->api_keys, F_OK) != 0 && errno == ENOENT) {
            /* the image's default path with nothing mounted there, or a typo */
            fprintf(stderr,
                    "dpbudgetd: --api-keys (DPBUDGET_API_KEYS): there is no file at %s: put the "
                    "API keys file there (lines '<sha256 hex of token> <scopes> [name]'; in a "
                    "container: mount it, e.g. -v \"$PWD/api-keys:%s:ro\"), or set "
                    "DPBUDGET_API_KEYS to the path of yours\n",
                    st->api_keys, st->api_keys);
            return 2;
        }
        if (auth_reload(keys, st->api_keys, NULL, msg, sizeof msg) != 0) {
            fprintf(stderr, "dpbudgetd: --api-keys: %s\n", msg);
            return 2;
        }
        cfg->auth = keys;
    } else if (!is_loopback(cfg->listen_addr)) {
        fprintf(stderr,
                "dpbudgetd: refusing to listen on %s without API keys: anyone who can reach it "
                "could spend or read privacy budgets. Set DPBUDGET_API_KEYS=FILE (or --api-keys "
                "FILE), a file of lines '<sha256 hex of token> <scopes> [name]' (in a "
                "container: mount it, e.g. -v \"$PWD/api-keys:/etc/dpbudget/api-keys:ro\"), or "
                "listen on 127.0.0.1\n",
                cfg->listen_addr);
        return 2;
    }
    if ((st->tls_cert == NULL) != (st->tls_key == NULL)) {
        fprintf(stderr, "dpbudgetd: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (st->tls_cert) {
        char msg[512];
        if (load_tls(st, msg, sizeof msg) != 0) {
            fprintf(stderr, "dpbudgetd: %s\n", msg);
            return 2;
        }
        cfg->tls = 1;
    }
    return 0;
}

/* Opens the ledger of the settings into app->ledger (stays NULL with --no-ledger): in the
 * database (shown: its url without the password), or in the data directory, locked (*lock_fd:
 * the lock, kept open while the daemon runs). 0, or -1 after a JSON line saying why. */
static int open_ledger(const config_settings *st, const char *shown, app_state *app, int *lock_fd)
{
    const ledger_options *lo = &st->lo;
    if (!st->use_ledger)
        return 0;
    if (lo->ledger_url)
        return open_shared_ledger(lo, shown, &app->ledger);
    *lock_fd = open_data_dir(lo->dir);
    if (*lock_fd < 0)
        return -1;
    dpb_error err = {0};
    if (ledger_open(lo, &app->ledger, &err) == DPB_OK)
        return 0;
    char ts[40], dir[PATH_MAX];
    reqlog_time(ts, sizeof ts);
    admin_redact_url(lo->dir, dir, sizeof dir); /* a path is shown as it is */
    admin_scrub(err.detail, lo->dir);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "ts", ts, "level", "error", "msg",
                  "cannot open the ledger", "data_dir", dir, "status", dpb_strstatus(err.status),
                  "detail", err.detail, "hint",
                  err.status == DPB_ECORRUPT
                      ? "the files are left as they are: keep a copy, check them with dpbudgetd "
                        "--verify, and restore the data directory from a backup"
                      : "fix the file named in the detail (type, permissions, disk), then start "
                        "again");
    daemonlog_json(o, err.detail);
    return -1;
}

/* The "listening" line: address, bound port, version, the ledger (none, the database's
 * url without its password, or the data directory) and the signing key's key_id. */
static void log_listening(const config_settings *st, const char *shown, unsigned port,
                          const signer *sg)
{
    char ts[40], dir[PATH_MAX];
    reqlog_time(ts, sizeof ts);
    admin_redact_url(st->lo.dir ? st->lo.dir : "", dir, sizeof dir);
    json_t *up = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s}", "ts", ts, "level", "info", "msg",
                           "listening", "listen", st->cfg.listen_addr, "port", (int)port, "version",
                           DPB_VERSION, "ledger",
                           !st->use_ledger     ? "none"
                           : st->lo.ledger_url ? shown
                                               : dir);
    if (up && sg) /* the public key's id: never the key */
        json_object_set_new(up, "signing_key_id", json_string(signer_key_id(sg)));
    daemonlog_json(up, "{\"msg\":\"listening\"}");
}

/* --port-file: the bound port, written to a temporary file renamed into place. 0, or -1
 * after a message. */
static int write_port_file(const char *port_file, unsigned port)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0 ||
        rename(tmp, port_file) != 0) {
        fprintf(stderr, "dpbudgetd: cannot write --port-file %s: %s\n", port_file, strerror(errno));
        return -1;
    }
    return 0;
}

/* Waits until the monotonic time until (dpb_mono_s) for a stop signal of set: 1 when one
 * came, 0 at until; SIGHUP reloads (reload) and waits on. */
static int stop_signal_before(const sigset_t *set, double until, const config_settings *st,
                              auth_table *keys, int tls)
{
    for (;;) {
        double left = until - dpb_mono_s();
        if (left <= 0.0)
            return 0;
        struct timespec tick = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        int sig = sigtimedwait(set, NULL, &tick);
        if (sig == SIGHUP)
            reload(st, keys, tls);
        else if (sig == SIGINT || sig == SIGTERM)
            return 1;
    }
}

/*
 * The stop, as orchestrators expect it (docs/OPERATIONS.md, "Stopping"): from the signal on,
 * /readyz answers 503 shutting_down and every answer carries Connection: close; after SIGTERM
 * the daemon serves on for --shutdown-grace seconds (load balancers take it out meanwhile;
 * SIGINT, a person at a terminal, skips the grace); then it stops accepting connections and
 * gives the requests in flight up to --shutdown-deadline seconds to finish (computations
 * included: they are answered, not abandoned). A second SIGINT or SIGTERM cuts either wait
 * short. What is still running then is stopped by http_stop (a computation 503; a ledger
 * write finishes, bounded by its store's deadline).
 */
static void drain(http_server *srv, app_state *app, int sig, const sigset_t *set,
                  const config_settings *st, auth_table *keys, int tls)
{
    __atomic_store_n(&app->stopping, 1, __ATOMIC_RELEASE);
    http_drain_begin(srv);
    double grace = sig == SIGTERM ? st->shutdown_grace : 0.0;
    daemonlog_stopping(sig, grace, st->shutdown_deadline);
    if (stop_signal_before(set, dpb_mono_s() + grace, st, keys, tls)) {
        daemonlog_line("info", "stopping now", "a second stop signal: no more waiting");
        return;
    }
    if (http_quiesce(srv) != 0)
        daemonlog_line("error", "cannot stop accepting connections",
                       "libmicrohttpd refused to quiesce: the daemon stops at once");
    double end = dpb_mono_s() + st->shutdown_deadline;
    while (http_in_flight(srv) > 0 && dpb_mono_s() < end) {
        double step = dpb_mono_s() + 0.01;
        if (stop_signal_before(set, step < end ? step : end, st, keys, tls)) {
            daemonlog_line("info", "stopping now", "a second stop signal: no more waiting");
            return;
        }
    }
    unsigned left = http_in_flight(srv);
    char detail[160];
    snprintf(detail, sizeof detail,
             left ? "%u requests still in flight at --shutdown-deadline: stopped"
                  : "every request in flight was answered",
             left);
    daemonlog_line(left ? "warn" : "info", "drained", detail);
}

/* Waits for a stop signal of set (returned): SIGHUP reloads (reload) and waits on; once a
 * second at most the ledger's new snapshot failures are logged. */
static int wait_for_stop(const sigset_t *set, const config_settings *st, auth_table *keys, int tls,
                         ledger *l)
{
    uint64_t snap_failed = 0; /* the failed snapshots already logged */
    for (;;) {
        struct timespec tick = {1, 0};
        int sig = sigtimedwait(set, NULL, &tick);
        if (sig == SIGHUP) {
            reload(st, keys, tls);
            continue;
        }
        if (sig < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (l)
                daemonlog_snapshot_failures(l, &snap_failed);
            continue;
        }
        return sig;
    }
}

int main(int argc, char **argv)
{
    config_settings st;
    config_defaults(&st);
    if (argc > 1 && admin_is_command(argv[1]))
        return admin_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "keygen") == 0)
        return signer_keygen_main(argc - 1, argv + 1);
    const char *config;
    int probe, rc;
    if (first_pass(argc, argv, &config, &probe, &rc))
        return rc;
    if ((rc = config_load(&st, config, argc, argv)) != 0)
        return rc;
    if (probe) {
        rc = run_healthcheck(&st);
        config_release();
        return rc;
    }
    http_config cfg;
    auth_table keys;
    if ((rc = check_settings(&st, &keys, &cfg)) != 0)
        return rc;
    signer *sg = NULL;
    if (st.signing_key) {
        char msg[600];
        if (signer_load(st.signing_key, &sg, msg, sizeof msg) != 0) {
            fprintf(stderr, "dpbudgetd: --signing-key: %s\n", msg);
            return 2;
        }
    }

    gsl_set_error_handler_off();
    /* Block the stop signals in every thread; the main thread waits for them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    app_state app = {NULL, st.reservation_ttl, 0, st.ledger_max_pld_evals, sg};
    int lock_fd = -1;
    char shown_url[512] = "";
    if (st.lo.ledger_url)
        admin_redact_url(st.lo.ledger_url, shown_url, sizeof shown_url);
    if (open_ledger(&st, shown_url, &app, &lock_fd) != 0) {
        signer_free(sg);
        return 1;
    }
    if (app.ledger) /* the spends a change needs, computed before its lock */
        ledger_set_compute_limits(app.ledger, st.cfg.ledger_deadline, st.ledger_max_pld_evals);
    if (st.use_ledger) {
        metrics_ledger_backend(st.lo.ledger_url ? "postgresql" : "file");
        ledger_set_named_limits(app.ledger, st.max_named_events, st.max_named_bytes);
        ledger_kept_cap(app.ledger, (size_t)st.pld_kept_mib << 20);
    }
    cfg.app = &app;
    cfg.routes = ROUTES;
    metrics_routes(ROUTES);
    http_server *srv = http_start(&cfg);
    if (srv == NULL) {
        ledger_close(app.ledger);
        return 1;
    }
    pld_plan_memory((size_t)st.pld_plan_mib << 20);
    pld_warm_plans_start(); /* FFT plans for the PLD accountant, on a thread of their own */
    unsigned port = http_port(srv);
    log_listening(&st, shown_url, port, sg);
    if (st.port_file && write_port_file(st.port_file, port) != 0) {
        http_stop(srv);
        ledger_close(app.ledger);
        return 1;
    }
    int sig = wait_for_stop(&set, &st, &keys, cfg.tls, app.ledger);
    drain(srv, &app, sig, &set, &st, &keys, cfg.tls);
    http_stop(srv); /* the ledger's requests finish: every acknowledged charge is durable */
    ledger_close(app.ledger);
    auth_free(&keys);
    signer_free(sg);
    if (lock_fd >= 0)
        close(lock_fd);
    config_release();
    return 0;
}
