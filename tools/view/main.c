/* view — a browser viewer for dumps (docs/view.md). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "view/view.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: view DUMP.h5 [DUMP2.h5 ...] [options]\n"
                 "\n"
                 "Serves a web page to explore the dumps' attention maps, side by side, at any\n"
                 "zoom; open the printed URL in a browser (see docs/view.md). Read-only.\n"
                 "\n"
                 "  --port P          TCP port, 0 = any free one (default: 8077)\n"
                 "  --bind ADDR       numeric address to listen on (default: 127.0.0.1)\n"
                 "  --allow-remote    required to bind an address that is not loopback: anyone who\n"
                 "                    can reach it can read the dumps (default: refused)\n"
                 "  --cache-mb N      memory for rendered tiles and pooled maps, 16 to 65536, at least\n"
                 "                    two base grids (36 for the default --base-cells) (default: 256)\n"
                 "  --threads N       request threads, 1 to 64 (default: 4)\n"
                 "  --base-cells N    each map is pooled once to at most N x N cells for the zoomed-out\n"
                 "                    levels; closer zooms read the dump, 64 to 8192 (default: 2048)\n"
                 "  --quiet           print only the URL\n"
                 "  --help            this text\n"
                 "  --version         the version of difflens\n");
}

int main(int argc, char **argv)
{
    enum { O_PORT = 256, O_BIND, O_REMOTE, O_CACHE, O_THREADS, O_BASE, O_QUIET, O_HELP };
    static const struct option opts[] = {{"port", required_argument, 0, O_PORT},
                                         {"bind", required_argument, 0, O_BIND},
                                         {"allow-remote", no_argument, 0, O_REMOTE},
                                         {"cache-mb", required_argument, 0, O_CACHE},
                                         {"threads", required_argument, 0, O_THREADS},
                                         {"base-cells", required_argument, 0, O_BASE},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"help", no_argument, 0, O_HELP},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    dfl_view_params vp = dfl_view_params_default();
    dfl_view_server_params sp = dfl_view_server_params_default();
    sp.port = 8077;
    dfl_error err;
    int64_t x;
    int quiet = 0, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_PORT:
            if (dfl_cli_int("--port", optarg, 0, 65535, &x, &err)) goto bad;
            sp.port = (int)x;
            break;
        case O_BIND: sp.bind = optarg; break;
        case O_REMOTE: sp.allow_remote = 1; break;
        case O_CACHE:
            if (dfl_cli_int("--cache-mb", optarg, 16, 65536, &x, &err)) goto bad;
            vp.cache_bytes = (size_t)x << 20;
            break;
        case O_THREADS:
            if (dfl_cli_int("--threads", optarg, 1, 64, &x, &err)) goto bad;
            sp.threads = (int)x;
            break;
        case O_BASE:
            if (dfl_cli_int("--base-cells", optarg, 64, 8192, &vp.base_cells, &err)) goto bad;
            break;
        case O_QUIET: quiet = 1; break;
        case O_HELP: usage(stdout); return 0;
        case DFL_CLI_OPT_VERSION:
        case DFL_CLI_OPT_LIST: return dfl_cli_common(stdout, "view", c, opts);
        default: usage(stderr); return 2;
        }
    }
    vp.dumps = (const char *const *)argv + optind;
    vp.ndumps = (size_t)(argc - optind);
    if (vp.ndumps == 0) {
        fprintf(stderr, "view: give at least one dump (see --help)\n");
        return 2;
    }
    if (vp.ndumps > DFL_VIEW_MAX_DUMPS) {
        fprintf(stderr, "view: at most %d dumps (got %zu)\n", DFL_VIEW_MAX_DUMPS, vp.ndumps);
        return 2;
    }

    /* Block the stop signals before any thread starts, then wait for one. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    dfl_view *v = NULL;
    dfl_view_server *srv = NULL;
    int port = 0;
    dfl_status s = dfl_view_open(&vp, &v, &err);
    if (!s) s = dfl_view_server_start(v, &sp, &srv, &port, &err);
    if (s) {
        fprintf(stderr, "view: %s\n", err.msg);
        dfl_view_close(v);
        return dfl_status_exit_code(s);
    }
    int v6 = strchr(sp.bind, ':') != NULL;
    printf("http://%s%s%s:%d/\n", v6 ? "[" : "", sp.bind, v6 ? "]" : "", port);
    fflush(stdout);
    if (!quiet) fprintf(stderr, "view: serving %zu dump%s (Ctrl-C stops)\n", vp.ndumps, vp.ndumps == 1 ? "" : "s");
    int sig = 0;
    sigwait(&stop, &sig);
    dfl_view_server_stop(srv);
    dfl_view_close(v);
    return 0;
bad:
    fprintf(stderr, "view: %s\n", err.msg);
    return 2;
}
