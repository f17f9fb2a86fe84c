/* view_server.c — the viewer over HTTP: libmicrohttpd with a pool of worker threads.
 * The raw request target (path and query, undecoded) is taken from microhttpd's URI
 * log hook and given to dfl_view_handle, so the parser that is fuzzed is the parser
 * that runs. Bodies are refused; headers are bounded by microhttpd's per-connection
 * memory limit. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "view/view.h"

struct dfl_view_server {
    struct MHD_Daemon *d;
    dfl_view *v;
};

dfl_view_server_params dfl_view_server_params_default(void)
{
    dfl_view_server_params p = {"127.0.0.1", 0, 0, 4};
    return p;
}

/* Keep the raw target (with its query) for the request; freed when it completes. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *con)
{
    (void)cls;
    (void)con;
    return strdup(uri ? uri : "");
}

static void on_done(void *cls, struct MHD_Connection *con, void **req_cls, enum MHD_RequestTerminationCode why)
{
    (void)cls;
    (void)con;
    (void)why;
    free(*req_cls);
    *req_cls = NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **req_cls)
{
    (void)url;
    (void)version;
    (void)upload;
    dfl_view_server *s = cls;
    dfl_view_response r;
    if (*upload_size) {
        /* a body: not something a viewer takes; drop it and answer once at the end */
        *upload_size = 0;
        return MHD_YES;
    }
    dfl_view_handle(s->v, method, *req_cls ? (const char *)*req_cls : "", &r);
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        r.len, r.body, r.is_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        dfl_view_response_free(&r);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", r.type);
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data: blob:; connect-src 'self'");
    enum MHD_Result ok = MHD_queue_response(con, (unsigned)r.code, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* 1 when addr is a loopback address (127.0.0.0/8 or ::1). */
static int is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a);
}

dfl_status dfl_view_server_start(dfl_view *v, const dfl_view_server_params *p, dfl_view_server **out, int *port_out,
                                 dfl_error *err)
{
    *out = NULL;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (p->port < 0 || p->port > 65535) return dfl__fail(err, DFL_ERR_USAGE, "port %d out of 0..65535", p->port);
    if (inet_pton(AF_INET, p->bind, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)p->port);
    } else if (inet_pton(AF_INET6, p->bind, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)p->port);
        flags |= MHD_USE_IPv6;
    } else {
        return dfl__fail(err, DFL_ERR_USAGE, "bind address '%s' is not a numeric IPv4 or IPv6 address", p->bind);
    }
    if (!is_loopback((struct sockaddr *)&ss) && !p->allow_remote)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "%s is not a loopback address: anyone who reaches it could read the dumps; "
                         "add --allow-remote to bind it anyway",
                         p->bind);
    dfl_view_server *s = calloc(1, sizeof *s);
    if (!s) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    s->v = v;
    unsigned threads = p->threads > 0 ? (unsigned)p->threads : 1;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT, 64u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
                            MHD_OPTION_END);
    if (!s->d) {
        free(s);
        return dfl__fail(err, DFL_ERR_IO, "cannot listen on %s port %d (in use, or not an address of this machine?)",
                         p->bind, p->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    if (port_out) *port_out = info ? info->port : p->port;
    *out = s;
    return DFL_OK;
}

void dfl_view_server_stop(dfl_view_server *s)
{
    if (!s) return;
    MHD_stop_daemon(s->d);
    free(s);
}
