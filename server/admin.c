/*
 * admin.c - the offline ledger commands (admin.h): migrate, copy-ledger, compare-ledgers.
 * Each opens the ledgers it names as the daemon would (a data directory is locked first, so
 * that no daemon writes it meanwhile; a PostgreSQL url is migrated and caught up), acts, and
 * closes them without writing a snapshot into a source.
 */
#include "admin.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/ledger/ledger.h"
#include "../core/ledger/store.h"

/* ---- showing a url ------------------------------------------------------------------------ */

/* Both by store_pg.c's rules (store.h): it parses the string the way libpq does. */
void admin_redact_url(const char *url, char *out, size_t cap)
{
    store_pg_redact(url, out, cap);
}

void admin_scrub(char *text, const char *url)
{
    store_pg_scrub(text, url);
}

/* ---- opening a ledger by DIR or URL -------------------------------------------------------- */

typedef struct {
    const char *where; /* DIR or URL, as given */
    char shown[PATH_MAX];
    ledger *l;
    int lock_fd;
} opened;

/* Lock DIR (created when create is set) as the daemon does: no daemon writes it meanwhile. */
static int lock_dir(const char *dir, int create, char *why, size_t cap)
{
    struct stat sb;
    if (create && mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(why, cap, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(why, cap, "%s is not a data directory (%s)", dir,
                 errno ? strerror(errno) : "not a directory");
        return -1;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/LOCK", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, cap, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(why, cap, "%s is in use by a running dpbudgetd: stop it first", dir);
        close(fd);
        return -1;
    }
    return fd;
}

/* Open the ledger at o->where; 0, or -1 after printing why (prefix: the command). */
static int open_ledger(const char *cmd, opened *o)
{
    o->l = NULL;
    o->lock_fd = -1;
    admin_redact_url(o->where, o->shown, sizeof o->shown);
    ledger_options lo = {0};
    lo.snapshot_every = 1000000000;
    char why[PATH_MAX + 128];
    if (store_is_pg_url(o->where)) {
        lo.ledger_url = o->where;
        lo.pg_pool = 2;
    } else {
        o->lock_fd = lock_dir(o->where, 0, why, sizeof why);
        if (o->lock_fd < 0) { /* a mistyped url is taken for a directory: its name scrubbed */
            admin_scrub(why, o->where);
            fprintf(stderr, "dpbudgetd %s: %s\n", cmd, why);
            return -1;
        }
        lo.dir = o->where;
    }
    dpb_error err = {0};
    if (ledger_open(&lo, &o->l, &err) != DPB_OK) {
        admin_scrub(err.detail, o->where);
        fprintf(stderr, "dpbudgetd %s: cannot open the ledger at %s (%s): %s\n", cmd, o->shown,
                dpb_strstatus(err.status), err.detail);
        if (o->lock_fd >= 0)
            close(o->lock_fd);
        o->lock_fd = -1;
        o->l = NULL;
        return -1;
    }
    return 0;
}

static void close_ledger(opened *o)
{
    if (o->l)
        ledger_close_nosnapshot(o->l);
    if (o->lock_fd >= 0)
        close(o->lock_fd);
    o->l = NULL;
    o->lock_fd = -1;
}

/* ---- the commands ---------------------------------------------------------------------------- */

static const char ADMIN_USAGE[] =
    "Usage: dpbudgetd migrate [--ledger-url URL]\n"
    "       dpbudgetd copy-ledger --from DIR|URL --to DIR|URL\n"
    "       dpbudgetd compare-ledgers DIR|URL DIR|URL\n"
    "migrate: apply the PostgreSQL schema migrations this version knows (each once, safe\n"
    "  while replicas start) and print the schema version found and left; the url may come\n"
    "  from DPBUDGET_LEDGER_URL.\n"
    "copy-ledger: copy the whole ledger (clients, spends, rounds, reservations, named events)\n"
    "  into an empty target, a data directory or a PostgreSQL url, then check that both hold\n"
    "  the same. A non-empty target is refused. A data directory is locked (stop its daemon\n"
    "  first); a database source may keep serving.\n"
    "compare-ledgers: exit 0 when both hold the same clients, spends, rounds and named events,\n"
    "  1 when they differ (the first difference is printed), 2 on an error.\n"
    "Exit status: 0 done, 1 failed (or different), 2 usage.\n";

static int cmd_migrate(int argc, char **argv)
{
    const char *url = getenv("DPBUDGET_LEDGER_URL");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ledger-url") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else {
            char shown[PATH_MAX]; /* a url given without --ledger-url */
            admin_redact_url(argv[i], shown, sizeof shown);
            fprintf(stderr, "dpbudgetd migrate: unexpected argument '%s'\n%s", shown, ADMIN_USAGE);
            return 2;
        }
    }
    if (url == NULL || !store_is_pg_url(url)) {
        fprintf(stderr, "dpbudgetd migrate: give --ledger-url postgresql://... (or set "
                        "DPBUDGET_LEDGER_URL)\n");
        return 2;
    }
    char shown[PATH_MAX];
    admin_redact_url(url, shown, sizeof shown);
    store_pg_options po = {1, 0, 0};
    int from = 0, to = 0;
    dpb_error err = {0};
    if (store_pg_migrate(url, &po, &from, &to, &err) != DPB_OK) {
        admin_scrub(err.detail, url);
        fprintf(stderr, "dpbudgetd migrate: %s (%s): %s\n", shown, dpb_strstatus(err.status),
                err.detail);
        return 1;
    }
    printf("dpbudgetd migrate: %s: schema version %d -> %d%s\n", shown, from, to,
           from == to ? " (nothing to do)" : "");
    return 0;
}

static int cmd_copy(int argc, char **argv)
{
    const char *from = NULL, *to = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
            from = argv[++i];
        else if (strcmp(argv[i], "--to") == 0 && i + 1 < argc)
            to = argv[++i];
        else {
            char shown[PATH_MAX];
            admin_redact_url(argv[i], shown, sizeof shown);
            fprintf(stderr, "dpbudgetd copy-ledger: unexpected argument '%s'\n%s", shown,
                    ADMIN_USAGE);
            return 2;
        }
    }
    if (from == NULL || to == NULL) {
        fprintf(stderr, "dpbudgetd copy-ledger: give --from DIR|URL and --to DIR|URL\n%s",
                ADMIN_USAGE);
        return 2;
    }
    opened src = {from, "", NULL, -1}, dst = {to, "", NULL, -1};
    int rc = 1, to_lock = -1;
    char why[PATH_MAX + 128];
    if (open_ledger("copy-ledger", &src) != 0)
        goto out;
    /* a target directory is created and locked like a source (no daemon starts on it
     * meanwhile); its LOCK file does not make it non-empty */
    if (!store_is_pg_url(to)) {
        to_lock = lock_dir(to, 1, why, sizeof why);
        if (to_lock < 0) {
            admin_scrub(why, to);
            fprintf(stderr, "dpbudgetd copy-ledger: %s\n", why);
            goto out;
        }
    }
    admin_redact_url(to, dst.shown, sizeof dst.shown);
    dpb_error err = {0};
    if (ledger_copy_to(src.l, to, &err) != DPB_OK) {
        admin_scrub(err.detail, to);
        admin_scrub(err.detail, from);
        if (err.status == DPB_ECONFLICT)
            fprintf(stderr,
                    "dpbudgetd copy-ledger: %s is not empty (%s): nothing was written; copy into "
                    "an empty data directory or database\n",
                    dst.shown, err.detail);
        else
            fprintf(stderr, "dpbudgetd copy-ledger: cannot copy %s to %s (%s): %s\n", src.shown,
                    dst.shown, dpb_strstatus(err.status), err.detail);
        goto out;
    }
    if (to_lock >= 0) { /* reopened below under its own lock */
        close(to_lock);
        to_lock = -1;
    }
    if (open_ledger("copy-ledger", &dst) != 0)
        goto out;
    char diff[512];
    if (ledger_compare(src.l, dst.l, diff, sizeof diff) != 0) {
        fprintf(stderr, "dpbudgetd copy-ledger: the copy at %s differs from %s: %s\n", dst.shown,
                src.shown, diff);
        goto out;
    }
    ledger_summary s;
    ledger_get_summary(dst.l, &s);
    printf("dpbudgetd copy-ledger: %s -> %s: %llu clients, %llu rounds copied; both hold the "
           "same\n",
           src.shown, dst.shown, (unsigned long long)s.clients, (unsigned long long)s.rounds);
    rc = 0;
out:
    if (to_lock >= 0)
        close(to_lock);
    close_ledger(&dst);
    close_ledger(&src);
    return rc;
}

static int cmd_compare(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "dpbudgetd compare-ledgers: give two ledgers (DIR or URL)\n%s",
                ADMIN_USAGE);
        return 2;
    }
    opened a = {argv[1], "", NULL, -1}, b = {argv[2], "", NULL, -1};
    int rc = 2;
    if (open_ledger("compare-ledgers", &a) != 0 || open_ledger("compare-ledgers", &b) != 0)
        goto out;
    char diff[512];
    if (ledger_compare(a.l, b.l, diff, sizeof diff) != 0) {
        admin_scrub(diff, a.where);
        admin_scrub(diff, b.where);
        printf("dpbudgetd compare-ledgers: different: %s\n", diff);
        rc = 1;
    } else {
        ledger_summary s;
        ledger_get_summary(a.l, &s);
        printf("dpbudgetd compare-ledgers: same: %llu clients, %llu rounds\n",
               (unsigned long long)s.clients, (unsigned long long)s.rounds);
        rc = 0;
    }
out:
    close_ledger(&b);
    close_ledger(&a);
    return rc;
}

int admin_is_command(const char *arg)
{
    return strcmp(arg, "migrate") == 0 || strcmp(arg, "copy-ledger") == 0 ||
           strcmp(arg, "compare-ledgers") == 0;
}

int admin_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(ADMIN_USAGE, stdout);
            return 0;
        }
    if (strcmp(argv[0], "migrate") == 0)
        return cmd_migrate(argc, argv);
    if (strcmp(argv[0], "copy-ledger") == 0)
        return cmd_copy(argc, argv);
    return cmd_compare(argc, argv);
}
