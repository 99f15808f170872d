/*
 * floor.c - the floor for dpbudgetd's HTTP figures: a minimal libmicrohttpd server with the
 * daemon's own threading (internal polling thread pool, epoll, turbo; the same number of
 * threads) that reads any request, body included, and answers every one 200 with a fixed
 * application/json body of a given size. What it serves per second is what libmicrohttpd
 * and the kernel allow on this machine: dpbudgetd's throughput as a fraction of it is the
 * share of each request's cost that is HTTP's, not ours.
 *
 *   floor BODY_BYTES PORT_FILE [THREADS]
 *
 * Listens on 127.0.0.1, an ephemeral port written to PORT_FILE; THREADS 0 or absent: one
 * per CPU, as dpbudgetd's --threads 0. Runs until SIGTERM or SIGINT.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

static char *body;
static size_t body_len;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static MHD_RESULT on_request(void *cls, struct MHD_Connection *c, const char *url,
                             const char *method, const char *version, const char *upload,
                             size_t *upload_size, void **con_cls)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload;
    if (*con_cls == NULL) { /* the head: nothing to decide */
        *con_cls = c;
        return MHD_YES;
    }
    if (*upload_size > 0) { /* the body: read and dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body_len, body, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_RESULT ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: floor BODY_BYTES PORT_FILE [THREADS]\n");
        return 2;
    }
    body_len = strtoul(argv[1], NULL, 10);
    unsigned threads = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 0;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    body = malloc(body_len + 1);
    if (body == NULL || body_len > (64u << 20)) {
        fprintf(stderr, "floor: BODY_BYTES must be at most 64 MiB\n");
        return 2;
    }
    memset(body, 'x', body_len);
    if (body_len >= 2) {
        body[0] = '"';
        body[body_len - 1] = '"';
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* dpbudgetd's flags, thread pool and limits (server/http.c); libmicrohttpd's default
     * memory per connection (a bare server's) */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO, 0, NULL, NULL, on_request,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "floor: cannot start libmicrohttpd\n");
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    FILE *f = fopen(argv[2], "w");
    if (info == NULL || f == NULL || fprintf(f, "%u\n", (unsigned)info->port) < 0 ||
        fclose(f) != 0) {
        fprintf(stderr, "floor: cannot write the port file %s\n", argv[2]);
        MHD_stop_daemon(d);
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    while (!stop)
        pause();
    MHD_stop_daemon(d);
    free(body);
    return 0;
}
