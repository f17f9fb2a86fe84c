/* probe_mpi.c — probe's prompts split over MPI ranks, one dump joined by rank 0. */
#include "base/clock.h"
#include "cluster/probe_mpi.h"

#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "dump/dump_join.h"

#define TAG_PROGRESS   1
#define TAG_WARNING    2
#define PROGRESS_EVERY 0.5 /* seconds between a rank's progress messages */

int dfl_mpi_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

dfl_status dfl_mpi_start(int *argc, char ***argv, int *rank, int *size, dfl_error *err)
{
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS ||
        MPI_Comm_rank(MPI_COMM_WORLD, rank) != MPI_SUCCESS || MPI_Comm_size(MPI_COMM_WORLD, size) != MPI_SUCCESS)
        return dfl__fail(err, DFL_ERR_IO, "MPI failed to start");
    return DFL_OK;
}

void dfl_mpi_stop(void)
{
    MPI_Finalize();
}

/* Wait for a non-blocking collective without spinning a core that a rank still
 * computing may need (ranks finish at different times). */
static void wait_idle(MPI_Request *req)
{
    int done = 0;
    struct timespec pause = {0, 2000000};
    for (MPI_Test(req, &done, MPI_STATUS_IGNORE); !done; MPI_Test(req, &done, MPI_STATUS_IGNORE))
        nanosleep(&pause, NULL);
}

/* Every rank's status; every rank leaves with the first failing rank's status and
 * message ("rank R: …"), or DFL_OK. */
static dfl_status agree(dfl_status local, dfl_error *err, int rank, int size)
{
    int mine = (int)local, *all = calloc((size_t)size, sizeof *all);
    if (!all) MPI_Abort(MPI_COMM_WORLD, 1); /* a few bytes: nothing sensible to report */
    MPI_Request req;
    MPI_Iallgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &req);
    wait_idle(&req);
    int first = -1;
    for (int r = 0; r < size && first < 0; r++)
        if (all[r] != DFL_OK) first = r;
    dfl_status s = first < 0 ? DFL_OK : (dfl_status)all[first];
    free(all);
    if (first < 0) return DFL_OK;
    char msg[sizeof err->msg];
    if (rank == first) snprintf(msg, sizeof msg, "%s", err->msg);
    MPI_Ibcast(msg, (int)sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD, &req);
    wait_idle(&req);
    if (size == 1) return dfl__fail(err, s, "%s", msg);
    return dfl__fail(err, s, "rank %d: %s", first, msg);
}

/* ------------------------------------------------------------- parts */

/* "DIR/.BASE.partRofN.h5" for output "DIR/BASE". Caller frees; NULL when out of memory. */
static char *part_path(const char *out, int rank, int size)
{
    const char *slash = strrchr(out, '/');
    int dirlen = slash ? (int)(slash - out) + 1 : 0;
    size_t n = strlen(out) + 48;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%.*s.%s.part%dof%d.h5", dirlen, out, out + dirlen, rank, size);
    return p;
}

/* Parts (and their temporaries) of earlier runs to the same output: a killed job's
 * leftovers. Parts are named after the output, so nothing else matches. */
static void remove_stale_parts(const char *out)
{
    const char *slash = strrchr(out, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
    if (slash == out) snprintf(dir, sizeof dir, "/");
    const char *base = slash ? slash + 1 : out;
    char part[1024], tmp[1024];
    snprintf(part, sizeof part, ".%s.part", base);
    snprintf(tmp, sizeof tmp, "..%s.part", base);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, part, strlen(part)) && strncmp(e->d_name, tmp, strlen(tmp))) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* Rank 0, before any work: room for the whole job. While rank 0 joins, the parts and
 * the copies of every part but its own are on disk together: up to 2 − 1/R dumps. */
static dfl_status check_job_room(const dfl_probe_params *p, const dfl_config *c, const dfl_prompt_set *ps, int size,
                                 dfl_error *err)
{
    double avail = dfl__free_bytes(p->out_path);
    double need = dfl_probe_projected_bytes(p, c, ps) * (2.0 - 1.0 / size);
    if (avail < 0 || need <= avail) return DFL_OK;
    char a[32], n[32], msg[640];
    dfl__human_bytes(avail, a, sizeof a);
    dfl__human_bytes(need, n, sizeof n);
    const char *what = "the job is projected to take up to";
    const char *why = "(the ranks' parts, and the dump rank 0 joins from them), more than the";
    if (!p->overwrite)
        return dfl__fail(err, DFL_ERR_IO,
                         "%s: %s %s %s %s free on its file system (fewer prompts or maps, or --force "
                         "to try anyway)",
                         p->out_path, what, n, why, a);
    snprintf(msg, sizeof msg, "%s: %s %s %s %s free (--force: trying)", p->out_path, what, n, why, a);
    if (p->warn) p->warn(p->user, msg);
    return DFL_OK;
}

/* This rank's prompts, in file order. */
static dfl_status my_share(const dfl_probe_params *p, int rank, int size, size_t **subset, size_t *n, size_t *total,
                           int64_t *total_tokens, dfl_error *err)
{
    dfl_prompt_set ps = {NULL, 0};
    dfl_config cfg;
    char *cfg_text = NULL, *cfg_path = NULL;
    size_t len = 0, *tokens = NULL;
    int *owner = NULL;
    /* text prompts are tokenized here too: the split needs their token counts */
    dfl_status s = dfl_probe_read_prompts(p, &ps, err);
    if (!s && !(cfg_path = malloc(strlen(p->model_dir) + 16))) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!s) {
        sprintf(cfg_path, "%s/config.json", p->model_dir);
        s = dfl__read_file(cfg_path, &cfg_text, &len, err);
    }
    if (!s) s = dfl_config_parse(cfg_text, len, cfg_path, &cfg, err);
    if (!s && rank == 0) s = check_job_room(p, &cfg, &ps, size, err);
    if (!s) {
        tokens = dfl__alloc_array(ps.count + 1, sizeof *tokens);
        owner = dfl__alloc_array(ps.count + 1, sizeof *owner);
        *subset = dfl__alloc_array(ps.count + 1, sizeof **subset);
        if (!tokens || !owner || !*subset) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory for %zu prompts", ps.count);
    }
    *total_tokens = 0;
    for (size_t i = 0; !s && i < ps.count; i++)
        tokens[i] = ps.items[i].n_tokens, *total_tokens += (int64_t)tokens[i];
    if (!s) s = dfl_probe_shard(&cfg, tokens, ps.count, size, owner, err);
    *n = 0;
    for (size_t i = 0; !s && i < ps.count; i++)
        if (owner[i] == rank) (*subset)[(*n)++] = i;
    *total = ps.count;
    dfl_prompt_set_free(&ps);
    free(cfg_text), free(cfg_path), free(tokens), free(owner);
    return s;
}

/* ----------------------------------------------------------- progress */

/* What rank 0 knows of every rank's progress. */
typedef struct job_state {
    const dfl_probe_params *p;
    int rank, size;
    int64_t *samples_done, *tokens_done; /* [size] */
    size_t total;
    int64_t total_tokens;
    double start, last_sent;
    int64_t layer, layers;
    char **said; /* rank 0: the warnings printed so far */
    size_t n_said;
} job_state;

/* Rank 0: print a warning unless the same text was printed already (every rank checks
 * every prompt, so the file-wide warnings arrive once from each rank). */
static void say_once(job_state *j, const char *msg, int from)
{
    for (size_t i = 0; i < j->n_said; i++)
        if (!strcmp(j->said[i], msg)) return;
    char **grown = realloc(j->said, (j->n_said + 1) * sizeof *grown);
    char *copy = strdup(msg);
    if (grown) j->said = grown;
    if (grown && copy)
        j->said[j->n_said++] = copy;
    else
        free(copy); /* out of memory: printed, not remembered */
    if (!j->p->warn) return;
    if (from == 0) {
        j->p->warn(j->p->user, msg);
        return;
    }
    char line[1024];
    snprintf(line, sizeof line, "rank %d: %s", from, msg);
    j->p->warn(j->p->user, line);
}

/* Rank 0: take in every progress message and warning that has arrived. */
static void drain(job_state *j)
{
    for (;;) {
        int flag = 0, len = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) break;
        if (st.MPI_TAG == TAG_WARNING) {
            char msg[1024];
            MPI_Get_count(&st, MPI_CHAR, &len);
            if (len < 1) len = 1; /* senders cap theirs at sizeof msg */
            MPI_Recv(msg, len, MPI_CHAR, st.MPI_SOURCE, TAG_WARNING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            msg[len - 1] = '\0';
            say_once(j, msg, st.MPI_SOURCE);
            continue;
        }
        int64_t pg[2];
        MPI_Recv(pg, 2, MPI_INT64_T, st.MPI_SOURCE, TAG_PROGRESS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        j->samples_done[st.MPI_SOURCE] = pg[0], j->tokens_done[st.MPI_SOURCE] = pg[1];
    }
}

static void report_progress(job_state *j)
{
    dfl_probe_progress pg = {0, j->total, j->layer, j->layers, 0, j->total_tokens, dfl_clock_seconds() - j->start};
    for (int r = 0; r < j->size; r++)
        pg.sample += (size_t)j->samples_done[r], pg.tokens_done += j->tokens_done[r];
    j->p->progress(j->p->user, &pg);
}

/* The progress callback of each rank's own run. */
static void on_progress(void *user, const dfl_probe_progress *pg)
{
    job_state *j = user;
    j->samples_done[j->rank] = (int64_t)pg->sample, j->tokens_done[j->rank] = pg->tokens_done;
    j->layer = pg->layer, j->layers = pg->layers;
    if (j->rank == 0) {
        drain(j);
        if (j->p->progress) report_progress(j);
        return;
    }
    double t = dfl_clock_seconds();
    if (t - j->last_sent < PROGRESS_EVERY && pg->sample < pg->samples) return;
    j->last_sent = t;
    int64_t msg[2] = {(int64_t)pg->sample, pg->tokens_done};
    MPI_Send(msg, 2, MPI_INT64_T, 0, TAG_PROGRESS, MPI_COMM_WORLD);
}

/* Rank 0 prints its own warnings; the others send theirs to rank 0 (a sample's
 * non-finite values, for one, are found by the rank that runs it). */
static void on_warn(void *user, const char *msg)
{
    job_state *j = user;
    if (j->rank == 0) {
        say_once(j, msg, 0);
        return;
    }
    size_t len = strlen(msg) + 1;
    if (len > 1024) len = 1024; /* rank 0's buffer; rank 0 ends the text */
    MPI_Send(msg, (int)len, MPI_CHAR, 0, TAG_WARNING, MPI_COMM_WORLD);
}

/* Every rank, its own share done, waits for the others (rank 0 keeps the totals moving),
 * then all agree on the outcome. */
static dfl_status wait_for_ranks(job_state *j, dfl_status local, dfl_error *err)
{
    MPI_Request req;
    int done = 0;
    struct timespec pause = {0, 50000000};
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    while (!done) {
        if (j->rank == 0) {
            drain(j);
            if (j->p->progress) report_progress(j);
        }
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) nanosleep(&pause, NULL);
    }
    if (j->rank == 0) { /* messages sent before the barrier have all arrived */
        drain(j);
        if (j->p->progress) report_progress(j);
    }
    return agree(local, err, j->rank, j->size);
}

/* ------------------------------------------------------------------ run */

/* Sums of every rank's report on rank 0 (forward time: the slowest rank's). */
static void reduce_report(dfl_probe_report *rep)
{
    uint64_t counts[5] = {rep->samples, (uint64_t)rep->tokens, rep->targets, rep->targets_correct,
                          rep->nonfinite_samples},
             sums[5];
    double t = rep->forward_seconds, tmax, flops = rep->flops, fsum;
    MPI_Reduce(counts, sums, 5, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&flops, &fsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    rep->samples = (size_t)sums[0], rep->tokens = (int64_t)sums[1];
    rep->targets = (size_t)sums[2], rep->targets_correct = (size_t)sums[3], rep->nonfinite_samples = (size_t)sums[4];
    rep->forward_seconds = tmax, rep->flops = fsum;
}

/* Rank 0: the other parts into its own (the gathering step, timed), then its own to
 * the output — the rename every probe run ends with, timed apart because replacing an
 * existing dump costs the file system the freeing of the old one. */
static dfl_status join_parts(const dfl_probe_params *p, char *const *parts, int size, double *seconds, dfl_error *err)
{
    double t0 = dfl_clock_seconds();
    dfl_status s = dfl_dump_join(parts[0], (const char *const *)parts + 1, (size_t)size - 1, err);
    *seconds = dfl_clock_seconds() - t0;
    if (!s) s = dfl__commit_tmp(parts[0], p->out_path, p->overwrite, err);
    return s;
}

dfl_status dfl_probe_mpi_run(const dfl_probe_params *p, dfl_probe_report *report, dfl_error *err)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dfl_probe_report rep;
    memset(&rep, 0, sizeof rep);
    char **parts = calloc((size_t)size, sizeof *parts);
    int64_t *done = calloc(2 * (size_t)size, sizeof *done);
    size_t *subset = NULL, n = 0, total = 0;
    int64_t total_tokens = 0;
    dfl_status s = parts && done ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int r = 0; !s && r < size; r++)
        if (!(parts[r] = part_path(p->out_path, r, size))) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!s && p->subset) s = dfl__fail(err, DFL_ERR_USAGE, "an MPI run splits the prompts itself");
    /* A bad or existing output fails before any work (a directory even with --force);
     * a killed job's parts go. */
    if (!s && rank == 0 && !(s = dfl_probe_check_out(p, err)) &&
        !(s = dfl__check_overwrite(p->out_path, p->overwrite, err)))
        remove_stale_parts(p->out_path);
    s = agree(s, err, rank, size);
    /* after each agreement every rank holds the same status, so the collectives below
     * are entered by all ranks or by none */
    if (!s) {
        s = my_share(p, rank, size, &subset, &n, &total, &total_tokens, err);
        s = agree(s, err, rank, size);
    }
    if (!s) {
        job_state j = {p, rank, size, done, done + size, total, total_tokens, dfl_clock_seconds(), 0, 0, 0, NULL, 0};
        dfl_probe_params mine = *p;
        mine.subset = subset, mine.n_subset = n;
        mine.out_path = parts[rank];
        mine.overwrite = 1;    /* our own part name; stale ones are gone */
        mine.room_checked = 1; /* for the whole job, above */
        mine.user = &j, mine.warn = on_warn, mine.progress = on_progress;
        s = dfl_probe_run(&mine, &rep, err);
        s = wait_for_ranks(&j, s, err);
        for (size_t i = 0; i < j.n_said; i++)
            free(j.said[i]);
        free(j.said);
    }
    if (!s) {
        reduce_report(&rep);
        if (rank == 0) s = join_parts(p, parts, size, &rep.join_seconds, err);
        s = agree(s, err, rank, size);
    }
    for (int r = 0; parts && r < size; r++) {
        if (parts[r] && (r == rank || (rank == 0 && s))) unlink(parts[r]);
        free(parts[r]);
    }
    free(parts), free(done), free(subset);
    if (report) *report = rep;
    return s;
}
