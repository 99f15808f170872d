/* client.c - the libcurl helper behind the API tests (see client.h). */
#include "client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

static char base[128] = "http://127.0.0.1:8080";

/* The whole-transfer timeout of api_call (api_set_timeout). */
static long timeout_s = 10;

void api_set_timeout(long seconds)
{
    __atomic_store_n(&timeout_s, seconds > 0 ? seconds : 10, __ATOMIC_RELAXED);
}

void api_set_base(const char *base_url)
{
    snprintf(base, sizeof base, "%s", base_url);
}

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} growbuf;

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    growbuf *g = userdata;
    size_t n = size * nmemb;
    if (g->len + n + 1 > g->cap) {
        size_t ncap = g->cap ? g->cap : 4096;
        while (ncap < g->len + n + 1)
            ncap *= 2;
        char *nb = realloc(g->buf, ncap);
        if (nb == NULL) {
            g->oom = 1;
            return 0; /* aborts the transfer */
        }
        g->buf = nb;
        g->cap = ncap;
    }
    memcpy(g->buf + g->len, data, n);
    g->len += n;
    g->buf[g->len] = '\0';
    return n;
}

/* Copy the value of header line `line` (length n) into dst if its name is `name`. */
static void take_header(const char *line, size_t n, const char *name, char *dst, size_t dst_n)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return;
    const char *v = line + k + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    size_t len = (size_t)(end - v);
    if (len >= dst_n)
        len = dst_n - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

/* extra_header2 may be long: a test sends a head over --max-header-bytes (431) */
static char extra_header[256], extra_header2[32768], ca_path[256];

const char *api_get_base(void)
{
    return base;
}

void api_set_header(const char *header)
{
    snprintf(extra_header, sizeof extra_header, "%s", header ? header : "");
}

void api_set_header2(const char *header)
{
    snprintf(extra_header2, sizeof extra_header2, "%s", header ? header : "");
}

void api_set_ca(const char *path)
{
    snprintf(ca_path, sizeof ca_path, "%s", path ? path : "");
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
    api_reply *r = userdata;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        /* a new response head (e.g. after 100 Continue): forget the previous one */
        r->content_type[0] = '\0';
        r->allow[0] = '\0';
    }
    take_header(data, n, "Content-Type", r->content_type, sizeof r->content_type);
    take_header(data, n, "Allow", r->allow, sizeof r->allow);
    take_header(data, n, "X-Request-Id", r->request_id, sizeof r->request_id);
    take_header(data, n, "Retry-After", r->retry_after, sizeof r->retry_after);
    take_header(data, n, "WWW-Authenticate", r->www_authenticate, sizeof r->www_authenticate);
    return n;
}

typedef struct {
    const char *p;
    size_t left;
} reader;

static size_t on_read(char *dst, size_t size, size_t nmemb, void *userdata)
{
    reader *rd = userdata;
    size_t n = size * nmemb;
    if (n > rd->left)
        n = rd->left;
    /* small pieces: the body really arrives in several chunks */
    if (n > 8192)
        n = 8192;
    memcpy(dst, rd->p, n);
    rd->p += n;
    rd->left -= n;
    return n;
}

static int is_json_type(const char *ct)
{
    static const char *const types[] = {"application/json", "application/problem+json"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t k = strlen(types[i]);
        if (strncasecmp(ct, types[i], k) == 0 && (ct[k] == '\0' || ct[k] == ';' || ct[k] == ' '))
            return 1;
    }
    return 0;
}

/* A body as a JSON string, or null when it is not UTF-8 (binary hostile input). */
static json_t *body_string(const char *p, size_t n)
{
    json_t *s = json_stringn(p ? p : "", p ? n : 0);
    return s ? s : json_null();
}

void api_record(json_t *line)
{
    const char *path = getenv("DPB_CONTRACT_LOG");
    if (path == NULL || path[0] == '\0' || line == NULL) {
        json_decref(line);
        return;
    }
    char *s = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(line);
    if (s == NULL)
        return;
    size_t n = strlen(s);
    s[n] = '\n'; /* replaces the NUL: one write() per line keeps threads' lines whole */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        if (write(fd, s, n + 1) != (ssize_t)(n + 1))
            fprintf(stderr, "api client: short write to %s\n", path);
        close(fd);
    }
    free(s);
}

void api_record_exchange(const char *method, const char *path, const char *content_type,
                         const char *body, size_t body_len, const api_reply *r)
{
    if (getenv("DPB_CONTRACT_LOG") == NULL || r->status == 0)
        return;
    json_t *line = json_pack("{s:s, s:s, s:s, s:o, s:o, s:I, s:s, s:s, s:s, s:s, s:o}", "kind",
                             "exchange", "method", method, "path", path, "request_content_type",
                             content_type ? json_string(content_type) : json_null(), "request_body",
                             body ? body_string(body, body_len) : json_null(), "status",
                             (json_int_t)r->status, "content_type", r->content_type, "allow",
                             r->allow, "retry_after", r->retry_after, "www_authenticate",
                             r->www_authenticate, "body", body_string(r->body, r->body_len));
    api_record(line);
}

static int call(const char *method, const char *path, const char *content_type, const char *body,
                size_t body_len, int chunked, api_reply *out)
{
    memset(out, 0, sizeof *out);
    growbuf g = {0};
    reader rd = {body ? body : "", body ? body_len : 0};
    char url[512], ct_header[160];
    snprintf(url, sizeof url, "%s%s", base, path);

    CURL *h = curl_easy_init();
    if (h == NULL) {
        out->body = calloc(1, 1);
        out->curl_code = CURLE_FAILED_INIT;
        return -1;
    }
    struct curl_slist *hdrs = NULL;
    /* never "Expect: 100-continue": the body is sent at once */
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (content_type) {
        snprintf(ct_header, sizeof ct_header, "Content-Type: %s", content_type);
        hdrs = curl_slist_append(hdrs, ct_header);
    } else {
        hdrs = curl_slist_append(hdrs, "Content-Type:"); /* drop curl's default */
    }
    if (chunked)
        hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, __atomic_load_n(&timeout_s, __ATOMIC_RELAXED));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L);
    if (extra_header[0])
        hdrs = curl_slist_append(hdrs, extra_header);
    if (extra_header2[0])
        hdrs = curl_slist_append(hdrs, extra_header2);
    if (ca_path[0])
        curl_easy_setopt(h, CURLOPT_CAINFO, ca_path);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);

    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0 || body != NULL) {
        if (strcmp(method, "POST") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (body != NULL || strcmp(method, "POST") == 0) {
            curl_easy_setopt(h, CURLOPT_POST, 1L);
            if (chunked) {
                curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
                curl_easy_setopt(h, CURLOPT_READDATA, &rd);
            } else {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, rd.p);
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rd.left);
            }
        }
    }

    CURLcode rc = curl_easy_perform(h);
    out->curl_code = (int)rc;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);

    if (g.buf == NULL)
        g.buf = calloc(1, 1);
    out->body = g.buf;
    out->body_len = g.len;
    if (out->body && out->body_len > 0 && is_json_type(out->content_type))
        out->json = json_loadb(out->body, out->body_len, 0, NULL);
    api_record_exchange(method, path, content_type, body, body_len, out);
    return rc == CURLE_OK && !g.oom ? 0 : -1;
}

int api_call(const char *method, const char *path, const char *content_type, const char *body,
             size_t body_len, api_reply *out)
{
    return call(method, path, content_type, body, body_len, 0, out);
}

int api_call_chunked(const char *method, const char *path, const char *content_type,
                     const char *body, size_t body_len, api_reply *out)
{
    return call(method, path, content_type, body, body_len, 1, out);
}

int api_get(const char *path, api_reply *out)
{
    return call("GET", path, NULL, NULL, 0, 0, out);
}

int api_postf(api_reply *out, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *body = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (body == NULL) {
        memset(out, 0, sizeof *out);
        out->body = calloc(1, 1);
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(body, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = call("POST", path, "application/json", body, (size_t)n, 0, out);
    free(body);
    return rc;
}

void api_reply_free(api_reply *r)
{
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}
