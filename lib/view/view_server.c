/* view_server.c — the viewer over HTTP: libmicrohttpd with a pool of worker threads.
 * The raw request target (path and query, undecoded) is taken from microhttpd's URI
 * log hook and given to dfl_view_handle, so the parser that is fuzzed is the parser
 * that runs. Bodies are refused; headers are bounded by microhttpd's per-connection
 * memory limit.
 *
 * Against the web (docs/view.md "Safety"): only a Host header that names the address
 * bound (127.0.0.1, localhost, [::1] or --bind, with the port) is answered, others get
 * 421 — a page elsewhere that has its name resolve to 127.0.0.1 (DNS rebinding) cannot
 * read the dumps. A request without Host is answered only in HTTP/1.0 (browsers always
 * send one). A connection has HEADER_DEADLINE_S from its start, or from its previous
 * answer, to deliver its request whole (microhttpd's own timeout restarts at every
 * byte); one client address keeps at most PER_IP connections and all at most
 * MAX_CONNS: one more closes the connection of that address (or of the address that
 * holds the most) that has waited longest for its request, so slow clients cannot
 * keep a normal request from being served. The bookkeeping is a table under one lock,
 * filled by microhttpd's connection notifications; a watchdog thread closes (shutdown)
 * what is overdue. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "base/clock.h"
#include "view/view.h"

#define HEADER_DEADLINE_S 10.0 /* to deliver a request whole, from the start or the previous answer */
#define PER_IP            16   /* connections one client address keeps */
#define MAX_CONNS         128  /* connections kept in all */
#define TABLE             256  /* microhttpd's own limit: also connections closed, not yet reaped */

/* One connection microhttpd holds. */
typedef struct conn {
    struct MHD_Connection *c; /* NULL: a free slot */
    int fd;
    int family;           /* AF_INET or AF_INET6 */
    unsigned char ip[16]; /* the client's address, without the port */
    double since;         /* dfl_clock_seconds when it began to wait for its request */
    int waiting;          /* 1 until its request has arrived whole */
    int closing;          /* shut down here; microhttpd has not reaped it yet */
} conn;

struct dfl_view_server {
    struct MHD_Daemon *d;
    dfl_view *v;
    _Atomic int port;       /* the port bound (0 until known: every Host is refused) */
    int family;             /* of the address bound */
    unsigned char addr[16]; /* the address bound */
    int wildcard;           /* bound to 0.0.0.0 or :: — any address literal names it */
    char names[160];        /* "127.0.0.1:P, localhost:P, ..." for the 421 message */
    pthread_mutex_t lock;   /* guards conns and stop */
    pthread_cond_t wake;
    pthread_t watchdog;
    int watching, stop;
    conn conns[TABLE];
};

dfl_view_server_params dfl_view_server_params_default(void)
{
    dfl_view_server_params p = {"127.0.0.1", 0, 0, 4};
    return p;
}

/* ---------------------------------------------------------------- connections */

/* Close c now (the watchdog's or a newcomer's doing): microhttpd sees the end of the
 * stream and reaps it, with a CLOSED notification first, which waits for the lock. */
static void close_conn(conn *c)
{
    shutdown(c->fd, SHUT_RDWR);
    c->closing = 1;
}

/* The connection that has waited longest for its request among those of address
 * (family, ip) — of any address when family is 0 — or NULL. Under the lock. */
static conn *longest_waiting(dfl_view_server *s, int family, const unsigned char *ip)
{
    conn *best = NULL;
    for (int i = 0; i < TABLE; i++) {
        conn *c = &s->conns[i];
        if (!c->c || c->closing || !c->waiting) continue;
        if (family && (c->family != family || memcmp(c->ip, ip, 16))) continue;
        if (!best || c->since < best->since) best = c;
    }
    return best;
}

/* Connections of address (family, ip) still open. Under the lock. */
static int count_of(const dfl_view_server *s, int family, const unsigned char *ip)
{
    int n = 0;
    for (int i = 0; i < TABLE; i++) {
        const conn *c = &s->conns[i];
        n += c->c && !c->closing && (!family || (c->family == family && !memcmp(c->ip, ip, 16)));
    }
    return n;
}

/* The address holding the most open connections (into *family, ip). Under the lock. */
static void busiest(const dfl_view_server *s, int *family, unsigned char *ip)
{
    int most = 0;
    for (int i = 0; i < TABLE; i++) {
        const conn *c = &s->conns[i];
        if (!c->c || c->closing) continue;
        int n = count_of(s, c->family, c->ip);
        if (n > most) {
            most = n;
            *family = c->family;
            memcpy(ip, c->ip, 16);
        }
    }
}

static void on_connection(void *cls, struct MHD_Connection *con, void **socket_context,
                          enum MHD_ConnectionNotificationCode what)
{
    dfl_view_server *s = cls;
    pthread_mutex_lock(&s->lock);
    if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn *c = *socket_context;
        if (c) c->c = NULL;
        *socket_context = NULL;
        pthread_mutex_unlock(&s->lock);
        return;
    }
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *peer = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    conn *c = NULL;
    for (int i = 0; i < TABLE && !c; i++)
        if (!s->conns[i].c) c = &s->conns[i];
    if (!c || !fd) {
        /* no room to keep track of it (microhttpd's limit is the table's): not served */
        if (fd) shutdown(fd->connect_fd, SHUT_RDWR);
        *socket_context = NULL;
        pthread_mutex_unlock(&s->lock);
        return;
    }
    memset(c, 0, sizeof *c);
    c->c = con;
    c->fd = fd->connect_fd;
    c->since = dfl_clock_seconds();
    c->waiting = 1;
    if (peer && peer->client_addr->sa_family == AF_INET6) {
        c->family = AF_INET6;
        memcpy(c->ip, &((const struct sockaddr_in6 *)peer->client_addr)->sin6_addr, 16);
    } else if (peer) {
        c->family = AF_INET;
        memcpy(c->ip, &((const struct sockaddr_in *)peer->client_addr)->sin_addr, 4);
    }
    *socket_context = c;
    /* over a limit: the longest waiting of this address, or of the busiest one, makes
     * room; when none is waiting (all busy with requests), the newcomer goes */
    conn *out = NULL;
    int over_ip = c->family && count_of(s, c->family, c->ip) > PER_IP, over_all = count_of(s, 0, NULL) > MAX_CONNS;
    if (over_ip) {
        out = longest_waiting(s, c->family, c->ip);
    } else if (over_all) {
        int family = c->family;
        unsigned char ip[16];
        memcpy(ip, c->ip, 16);
        busiest(s, &family, ip);
        out = longest_waiting(s, family, ip);
    }
    if ((over_ip || over_all) && (!out || out == c)) out = c;
    if (out) close_conn(out);
    pthread_mutex_unlock(&s->lock);
}

/* The table slot of a connection (NULL when it is not kept). */
static conn *slot_of(struct MHD_Connection *con)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* Closes every connection that has waited too long for its request; runs until stop. */
static void *watchdog(void *arg)
{
    dfl_view_server *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t); /* pthread_cond_timedwait's clock */
        t.tv_nsec += 250 * 1000 * 1000;
        if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->wake, &s->lock, &t);
        double now = dfl_clock_seconds();
        for (int i = 0; i < TABLE; i++) {
            conn *c = &s->conns[i];
            if (c->c && !c->closing && c->waiting && now - c->since > HEADER_DEADLINE_S) close_conn(c);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---------------------------------------------------------------- requests */

/* Keep the raw target (with its query) for the request; freed when it completes. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *con)
{
    (void)cls;
    (void)con;
    return strdup(uri ? uri : "");
}

static void on_done(void *cls, struct MHD_Connection *con, void **req_cls, enum MHD_RequestTerminationCode why)
{
    dfl_view_server *s = cls;
    (void)why;
    free(*req_cls);
    *req_cls = NULL;
    /* answered: the next request's time starts now */
    pthread_mutex_lock(&s->lock);
    conn *c = slot_of(con);
    if (c) {
        c->waiting = 1;
        c->since = dfl_clock_seconds();
    }
    pthread_mutex_unlock(&s->lock);
}

/* 1 when port text p (NULL: none given) is the port bound: none only for port 80. */
static int port_ok(const char *p, int port)
{
    if (!p) return port == 80;
    size_t n = strlen(p);
    if (n == 0 || n > 5 || strspn(p, "0123456789") != n) return 0;
    return atoi(p) == port;
}

/* 1 when the Host header value names this server: 127.0.0.1, localhost, [::1] or the
 * address bound (any address literal when bound to 0.0.0.0 or ::), with its port. */
static int host_ok(const dfl_view_server *s, const char *host)
{
    char name[64];
    const char *port = NULL, *end;
    size_t n;
    int port_bound = atomic_load(&s->port);
    if (host[0] == '[') {
        if (!(end = strchr(host, ']')) || (n = (size_t)(end - host - 1)) >= sizeof name) return 0;
        if (end[1] == ':')
            port = end + 2;
        else if (end[1])
            return 0;
        memcpy(name, host + 1, n);
        name[n] = '\0';
        struct in6_addr a;
        if (inet_pton(AF_INET6, name, &a) != 1) return 0;
        int named = IN6_IS_ADDR_LOOPBACK(&a) || s->wildcard || (s->family == AF_INET6 && !memcmp(&a, s->addr, 16));
        return named && port_ok(port, port_bound);
    }
    end = strchr(host, ':');
    n = end ? (size_t)(end - host) : strlen(host);
    if (end) port = end + 1;
    if (n >= sizeof name) return 0;
    memcpy(name, host, n);
    name[n] = '\0';
    struct in_addr a;
    int named = !strcasecmp(name, "localhost");
    if (!named && inet_pton(AF_INET, name, &a) == 1)
        named = ntohl(a.s_addr) == INADDR_LOOPBACK || s->wildcard || (s->family == AF_INET && !memcmp(&a, s->addr, 4));
    return named && port_ok(port, port_bound);
}

/* Queue r (its body handed over) with the headers every answer carries. */
static enum MHD_Result queue(struct MHD_Connection *con, dfl_view_response *r)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->len, r->body, r->is_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        dfl_view_response_free(r);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", r->type);
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data: blob:; connect-src 'self'");
    enum MHD_Result ok = MHD_queue_response(con, (unsigned)r->code, resp);
    MHD_destroy_response(resp);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **req_cls)
{
    (void)url;
    (void)upload;
    dfl_view_server *s = cls;
    dfl_view_response r;
    pthread_mutex_lock(&s->lock);
    conn *c = slot_of(con);
    if (c) c->waiting = 0; /* the headers are in */
    pthread_mutex_unlock(&s->lock);
    if (*upload_size) {
        /* a body: not something a viewer takes; drop it and answer once at the end */
        *upload_size = 0;
        return MHD_YES;
    }
    const char *host = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (host ? !host_ok(s, host) : strcmp(version, MHD_HTTP_VERSION_1_0) != 0) {
        char *body = malloc(320);
        if (!body) return MHD_NO;
        snprintf(body, 320,
                 "{\"error\":\"the Host header does not name this server, which answers only to %s "
                 "(a page elsewhere must not reach it through a name of its own)\"}",
                 s->names);
        r = (dfl_view_response){MHD_HTTP_MISDIRECTED_REQUEST, "application/json", (unsigned char *)body, strlen(body),
                                0};
        return queue(con, &r);
    }
    dfl_view_handle(s->v, method, *req_cls ? (const char *)*req_cls : "", &r);
    return queue(con, &r);
}

/* 1 when addr is a loopback address (127.0.0.0/8 or ::1). */
static int is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
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
    s->family = ss.ss_family;
    if (ss.ss_family == AF_INET6)
        memcpy(s->addr, &a6->sin6_addr, 16);
    else
        memcpy(s->addr, &a4->sin_addr, 4);
    s->wildcard = ss.ss_family == AF_INET6 ? IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) : a4->sin_addr.s_addr == 0;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (pthread_create(&s->watchdog, NULL, watchdog, s) != 0) {
        dfl_view_server_stop(s);
        return dfl__fail(err, DFL_ERR_NOMEM, "cannot start the server's watchdog thread");
    }
    s->watching = 1;
    unsigned threads = p->threads > 0 ? (unsigned)p->threads : 1;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT, (unsigned)TABLE,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)(2 * PER_IP), MHD_OPTION_CONNECTION_TIMEOUT,
                            30u, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536, MHD_OPTION_URI_LOG_CALLBACK, on_uri,
                            NULL, MHD_OPTION_NOTIFY_COMPLETED, on_done, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                            s, MHD_OPTION_END);
    if (!s->d) {
        dfl_view_server_stop(s);
        return dfl__fail(err, DFL_ERR_IO, "cannot listen on %s port %d (in use, or not an address of this machine?)",
                         p->bind, p->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    int port = info ? info->port : p->port;
    int n = snprintf(s->names, sizeof s->names, "127.0.0.1:%d, localhost:%d, [::1]:%d", port, port, port);
    int v6 = ss.ss_family == AF_INET6;
    int plain = v6 ? IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr) : ntohl(a4->sin_addr.s_addr) == INADDR_LOOPBACK;
    if (s->wildcard)
        snprintf(s->names + n, sizeof s->names - (size_t)n, " or any address literal:%d", port);
    else if (!plain)
        snprintf(s->names + n, sizeof s->names - (size_t)n, v6 ? " or [%s]:%d" : " or %s:%d", p->bind, port);
    atomic_store(&s->port, port);
    if (port_out) *port_out = port;
    *out = s;
    return DFL_OK;
}

void dfl_view_server_stop(dfl_view_server *s)
{
    if (!s) return;
    if (s->d) MHD_stop_daemon(s->d);
    if (s->watching) {
        pthread_mutex_lock(&s->lock);
        s->stop = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->watchdog, NULL);
    }
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
