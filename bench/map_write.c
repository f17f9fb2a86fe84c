/* map_write.c — how fast the dump writes attention maps, per compression level.
 *
 *   map_write MODEL_DIR DUMP LAYERS REPEATS OUT.h5 LEVEL...
 *
 * Reads samples/000000/attn/map1 of DUMP (a probe --maps all dump of MODEL_DIR, f16),
 * its first LAYERS layers, into memory as f32, then writes them REPEATS times per LEVEL
 * (none or 0-9) into OUT.h5 through the direct stream probe uses: tiles of 32 rows x
 * 512 keys, rows handed over as the forward hands them (blocks of 128 rows, every head
 * in turn, runs that stop at a tile row and reach only the keys their last row sees),
 * the stream pumped after each block (probe deflates a block's tiles inside the next
 * block's attention region; here the pump's own team does).
 * Prints one line per level: "LEVEL best_seconds file_bytes map_bytes", map_bytes being
 * the f16 bytes of the tiles written (the causal ones). Timed: dump create to finish. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dump/dump.h"
#include "dump/dump_read.h"
#include "model/model.h"

#define TILE_ROWS  32
#define TILE_KEYS  512
#define BLOCK_ROWS 128

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const dfl_error *err)
{
    fprintf(stderr, "map_write: %s: %s\n", what, err->msg);
    exit(1);
}

/* maps[L, H, T, T] through a direct stream at `gzip` into path. */
static void write_maps(const dfl_model *m, const char *path, int gzip, const float *maps, int64_t L, int64_t H,
                       int64_t T)
{
    dfl_error err = {DFL_OK, ""};
    dfl_dump_info info = {m, "model", 0, "none", "last"};
    dfl_dump *d = NULL;
    if (dfl_dump_create(path, 1, &info, &d, &err)) die("create", &err);
    int64_t dims[4] = {L, H, T, T}, chunk[4] = {1, 1, T < TILE_ROWS ? T : TILE_ROWS, T < TILE_KEYS ? T : TILE_KEYS};
    dfl_dump_direct opt = dfl_dump_direct_default();
    opt.gzip = gzip;
    opt.open_rows = 4 * H;
    dfl_dump_stream *s = NULL;
    if (dfl_dump_stream_create_direct(d, "map1", DFL_H5_F16, 4, dims, chunk, &opt, &s, &err)) die("stream", &err);
    for (int64_t l = 0; l < L; l++)
        for (int64_t r0 = 0; r0 < T; r0 += BLOCK_ROWS) {
            for (int64_t h = 0; h < H; h++)
                for (int64_t r = r0; r < r0 + BLOCK_ROWS && r < T;) {
                    int64_t end = (r / TILE_ROWS + 1) * TILE_ROWS;
                    if (end > r0 + BLOCK_ROWS) end = r0 + BLOCK_ROWS;
                    if (end > T) end = T;
                    int64_t start[4] = {l, h, r, 0}, count[4] = {1, 1, end - r, end};
                    const float *src = maps + (((size_t)l * (size_t)H + (size_t)h) * (size_t)T + (size_t)r) * (size_t)T;
                    if (dfl_dump_stream_write_f32(s, start, count, src, T, &err)) die("write", &err);
                    r = end;
                }
            if (dfl_dump_stream_pump(s, &err)) die("pump", &err);
        }
    if (dfl_dump_stream_flush(s, &err)) die("flush", &err);
    dfl_dump_stream_close(s);
    if (dfl_dump_finish(d, &err)) die("finish", &err);
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: map_write MODEL_DIR DUMP LAYERS REPEATS OUT.h5 LEVEL...\n");
        return 2;
    }
    dfl_error err = {DFL_OK, ""};
    dfl_model *m = NULL;
    if (dfl_model_load(argv[1], &m, &err)) die(argv[1], &err);
    dfl_dump_reader *rd = NULL;
    if (dfl_dump_open(argv[2], &rd, &err)) die(argv[2], &err);
    const char *name = "samples/000000/attn/map1";
    dfl_dump_dset_info info;
    if (dfl_dump_dataset_info(rd, name, &info, &err)) die(name, &err);
    int64_t L = atoi(argv[3]), H = info.dims[1], T = info.dims[3], repeats = atoi(argv[4]);
    if (L < 1 || L > info.dims[0]) L = info.dims[0];
    size_t n = (size_t)L * (size_t)H * (size_t)T * (size_t)T;
    float *maps = malloc(n * sizeof *maps);
    int64_t start[4] = {0, 0, 0, 0}, count[4] = {L, H, T, T};
    if (!maps) return 1;
    if (dfl_dump_read_slab_f32(rd, name, start, count, maps, &err)) die(name, &err);
    dfl_dump_close(rd);
    /* f16 bytes of the tiles the causal rule stores */
    double map_bytes = 0;
    for (int64_t r = 0; r < T; r += TILE_ROWS)
        for (int64_t k = 0; k < T; k += TILE_KEYS)
            if (k <= (r + TILE_ROWS < T ? r + TILE_ROWS : T) - 1) map_bytes += TILE_ROWS * TILE_KEYS * 2.0;
    map_bytes *= (double)(L * H);
    for (int a = 6; a < argc; a++) {
        int gzip = strcmp(argv[a], "none") ? atoi(argv[a]) : -1;
        double best = 1e30;
        for (int64_t i = 0; i < repeats; i++) {
            double t0 = now();
            write_maps(m, argv[5], gzip, maps, L, H, T);
            double t = now() - t0;
            if (t < best) best = t;
        }
        struct stat st;
        if (stat(argv[5], &st)) return 1;
        printf("%s %.4f %lld %.0f\n", argv[a], best, (long long)st.st_size, map_bytes);
        fflush(stdout);
    }
    free(maps);
    dfl_model_free(m);
    return 0;
}
