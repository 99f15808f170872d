/*
 * client.h - a tiny libcurl client for the API tests: one request, one reply.
 *
 * Every call uses its own CURL easy handle (simple and thread-agnostic), CURLOPT_NOSIGNAL
 * and a 10 s timeout (api_set_timeout). The reply keeps the status code, the Content-Type and Allow
 * headers, the body (malloc'ed, NUL-terminated) and, when the Content-Type is application/json or
 * application/problem+json, the body parsed by jansson.
 */
#ifndef DPB_API_CLIENT_H
#define DPB_API_CLIENT_H

#include <stddef.h>

#include <jansson.h>

typedef struct {
    long status;            /* HTTP status, 0 when no response was received */
    char content_type[128]; /* "" when absent */
    char allow[64];         /* the Allow header, "" when absent */
    char *body;             /* malloc'ed, NUL-terminated (never NULL after api_call) */
    size_t body_len;
    json_t *json;              /* parsed body for JSON content types, else NULL */
    int curl_code;             /* CURLcode of the transfer (0 = CURLE_OK) */
    char request_id[80];       /* X-Request-Id, "" when absent */
    char retry_after[16];      /* Retry-After, "" when absent */
    char www_authenticate[64]; /* WWW-Authenticate, "" when absent */
} api_reply;

/* The timeout of each api_call from now on, in seconds (0: the default, 10). */
void api_set_timeout(long seconds);

/* Where the daemon listens, e.g. "http://127.0.0.1:40123" (copied). */
void api_set_base(const char *base_url);
const char *api_get_base(void);

/* Extra request headers sent with every call from now on, e.g. "Authorization: Bearer x"
 * (copied; NULL clears), and a CA file to trust for https (NULL: none). */
void api_set_header(const char *header);
void api_set_header2(const char *header);
void api_set_ca(const char *path);

/*
 * One request. content_type NULL sends no Content-Type header at all; body may be NULL
 * (no body). Returns 0 when a complete response was received, -1 otherwise (out is still
 * filled as far as possible). Release out with api_reply_free.
 */
int api_call(const char *method, const char *path, const char *content_type, const char *body,
             size_t body_len, api_reply *out);

/* The same, but the body is sent with "Transfer-Encoding: chunked" (no Content-Length). */
int api_call_chunked(const char *method, const char *path, const char *content_type,
                     const char *body, size_t body_len, api_reply *out);

/* GET path. */
int api_get(const char *path, api_reply *out);

/* POST path with Content-Type application/json and a printf-formatted body. */
int api_postf(api_reply *out, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

void api_reply_free(api_reply *r);

/* With $DPB_CONTRACT_LOG set, every exchange (method, path, request, status, Content-Type,
 * Allow, Retry-After, WWW-Authenticate, body) is appended to that file as one JSON line for
 * the contract check; api_record appends another line of the caller's (consumed; a no-op
 * without the variable). */
void api_record(json_t *line);

/* Log one exchange made by another client (the same line api_call writes). */
void api_record_exchange(const char *method, const char *path, const char *content_type,
                         const char *body, size_t body_len, const api_reply *r);

#endif
