/* quantize.c — the quantizers, the Hadamard transform, the load-time weight pass and the
 * forward pass's hooks of probe --quantize (model/quantize.h). */
#include "model/quantize.h"

#include <fenv.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/family.h"
#include "model/kernels.h"
#include "model/safetensors.h"

/* ------------------------------------------------------------- the spec */

dfl_qspec dfl_qspec_default(void)
{
    dfl_qspec q;
    memset(&q, 0, sizeof q);
    q.w.clip = q.a.clip = q.k.clip = q.v.clip = 1.0;
    return q;
}

int dfl_qspec_any(const dfl_qspec *q)
{
    return q && (q->w.bits || q->a.bits || q->k.bits || q->v.bits || q->k_hadamard || q->rotate);
}

/* One quantizer's options, fixed order: B:sym|asym:clip=R. */
static int put_quantizer(char *s, size_t n, const dfl_quantizer *z)
{
    return snprintf(s, n, "%d:%s:clip=%.9g", z->bits, z->asym ? "asym" : "sym", z->clip);
}

/* The canonical SPEC: every item with all its options spelled out, in a fixed order. */
static void canonical(dfl_qspec *q)
{
    char *s = q->text;
    size_t n = sizeof q->text, at = 0;
    s[0] = '\0';
#define PUT(...)                                                                                                       \
    do {                                                                                                               \
        int k_ = snprintf(s + at, at < n ? n - at : 0, __VA_ARGS__);                                                   \
        if (k_ > 0) at += (size_t)k_;                                                                                  \
    } while (0)
#define SEP() PUT("%s", at ? "," : "")
    char z[64];
    if (q->w.bits) {
        put_quantizer(z, sizeof z, &q->w);
        SEP();
        if (q->w_group)
            PUT("weights=%s:group=%lld", z, (long long)q->w_group);
        else
            PUT("weights=%s:channel", z);
        if (q->w_head) PUT(":head");
        if (q->w_embed) PUT(":embed");
    }
    if (q->a.bits) {
        put_quantizer(z, sizeof z, &q->a);
        SEP();
        PUT("acts=%s:%s", z, q->a_tensor ? "tensor" : "token");
    }
    if (q->k.bits || q->k_hadamard) {
        SEP();
        if (q->k.bits) {
            put_quantizer(z, sizeof z, &q->k);
            PUT("k=%s", z);
        } else {
            PUT("k=none");
        }
        if (q->k_hadamard) PUT(":hadamard");
    }
    if (q->v.bits) {
        put_quantizer(z, sizeof z, &q->v);
        SEP();
        PUT("v=%s", z);
    }
    if (q->rotate) {
        SEP();
        PUT("rotate");
    }
#undef SEP
#undef PUT
}

/* A whole number in [lo, hi] from the whole of text. */
static int whole(const char *text, long lo, long hi, long *out)
{
    char *end;
    if (!*text) return 0;
    long v = strtol(text, &end, 10);
    if (*end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* BITS: 2..8 or "none" (0). */
static int parse_bits(const char *text, int *bits)
{
    long b;
    if (!strcmp(text, "none")) {
        *bits = 0;
        return 1;
    }
    if (!whole(text, 2, 8, &b)) return 0;
    *bits = (int)b;
    return 1;
}

/* sym, asym, clip=R: the options every quantizer takes. 1 = taken, 0 = not one of them,
 * -1 = a bad clip ratio. */
static int quantizer_option(const char *opt, dfl_quantizer *z)
{
    if (!strcmp(opt, "sym") || !strcmp(opt, "asym")) {
        z->asym = opt[0] == 'a';
        return 1;
    }
    if (strncmp(opt, "clip=", 5)) return 0;
    char *end;
    double r = strtod(opt + 5, &end);
    if (!opt[5] || *end || !(r > 0.0 && r <= 1.0)) return -1;
    z->clip = r;
    return 1;
}

typedef enum item_kind { ITEM_W = 0, ITEM_A, ITEM_K, ITEM_V, ITEM_ROT, ITEM_KINDS } item_kind;

/* One ITEM (text[0..len)), added to q; seen[] marks the kinds already given. */
static dfl_status parse_item(const char *text, size_t len, dfl_qspec *q, int *seen, dfl_error *err)
{
    char buf[160], *save = NULL;
    if (len == 0 || len >= sizeof buf)
        return dfl__fail(err, DFL_ERR_USAGE, "--quantize: an empty or over-long item in the SPEC");
    memcpy(buf, text, len);
    buf[len] = '\0';
    char item[160];
    memcpy(item, buf, len + 1);
    char *head = strtok_r(buf, ":", &save);
    if (!head) return dfl__fail(err, DFL_ERR_USAGE, "--quantize: '%s' is not KIND=BITS[:OPTION...]", item);
    if (!strcmp(head, "rotate")) {
        if (seen[ITEM_ROT]++) return dfl__fail(err, DFL_ERR_USAGE, "--quantize: rotate given twice");
        if (strtok_r(NULL, ":", &save))
            return dfl__fail(err, DFL_ERR_USAGE, "--quantize: rotate takes no options ('%s')", item);
        q->rotate = 1;
        return DFL_OK;
    }
    char *eq = strchr(head, '=');
    if (!eq) return dfl__fail(err, DFL_ERR_USAGE, "--quantize: '%s' is not KIND=BITS[:OPTION...]", item);
    *eq = '\0';
    const char *kind = head, *bits = eq + 1;
    int is_w = !strcmp(kind, "weights"), is_a = !strcmp(kind, "acts"), is_kv = !strcmp(kind, "kv");
    int is_k = !strcmp(kind, "k") || is_kv, is_v = !strcmp(kind, "v") || is_kv;
    if (!is_w && !is_a && !is_k && !is_v)
        return dfl__fail(err, DFL_ERR_USAGE, "--quantize: kind '%s' is not weights, acts, kv, k, v or rotate", kind);
    dfl_quantizer z = {0, 0, 1.0};
    if (!parse_bits(bits, &z.bits))
        return dfl__fail(err, DFL_ERR_USAGE, "--quantize: %s=%s: bits must be 2 to 8 or none", kind, bits);
    int64_t group = 0;
    int head_on = 0, embed = 0, tensor = 0, hadamard = 0;
    for (char *opt; (opt = strtok_r(NULL, ":", &save));) {
        int r = quantizer_option(opt, &z);
        if (r < 0) return dfl__fail(err, DFL_ERR_USAGE, "--quantize: %s: clip must be in (0, 1] ('%s')", item, opt);
        if (r) continue;
        long g;
        if (is_w && !strcmp(opt, "channel"))
            group = 0;
        else if (is_w && !strncmp(opt, "group=", 6) && whole(opt + 6, 1, 1L << 30, &g))
            group = g;
        else if (is_w && !strcmp(opt, "head"))
            head_on = 1;
        else if (is_w && !strcmp(opt, "embed"))
            embed = 1;
        else if (is_a && (!strcmp(opt, "token") || !strcmp(opt, "tensor")))
            tensor = opt[1] == 'e';
        else if (is_k && !strcmp(opt, "hadamard"))
            hadamard = 1;
        else
            return dfl__fail(err, DFL_ERR_USAGE, "--quantize: %s: '%s' is not an option of %s (docs/probe.md)", item,
                             opt, kind);
    }
    if ((is_w && seen[ITEM_W]++) || (is_a && seen[ITEM_A]++) || (is_k && seen[ITEM_K]++) || (is_v && seen[ITEM_V]++))
        return dfl__fail(err, DFL_ERR_USAGE, "--quantize: %s: %s given twice", item, is_kv ? "k or v" : kind);
    if (is_w) q->w = z, q->w_group = group, q->w_head = head_on, q->w_embed = embed;
    if (is_a) q->a = z, q->a_tensor = tensor;
    if (is_k) q->k = z, q->k_hadamard = hadamard;
    if (is_v) q->v = z;
    return DFL_OK;
}

dfl_status dfl_qspec_parse(const char *spec, dfl_qspec *q, dfl_error *err)
{
    /* the kinds already set by earlier --quantize flags */
    int seen[ITEM_KINDS] = {q->w.bits != 0, q->a.bits != 0, q->k.bits || q->k_hadamard, q->v.bits != 0, q->rotate};
    if (!strcmp(spec, "none")) return DFL_OK;
    for (const char *p = spec;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        dfl_status s = parse_item(p, len, q, seen, err);
        if (s) return s;
        if (!comma) break;
        p = comma + 1;
    }
    canonical(q);
    return DFL_OK;
}

/* ------------------------------------------------------------ quantizer */

/* Scale and zero point of one group from its min and max (quantize.h). */
static void group_params(double lo, double hi, const dfl_quantizer *z, double *s, double *zero)
{
    if (!z->asym) {
        double a = fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi);
        *s = z->clip * a / (double)((1 << (z->bits - 1)) - 1);
        *zero = 0.0;
        return;
    }
    lo = z->clip * (lo < 0.0 ? lo : 0.0);
    hi = z->clip * (hi > 0.0 ? hi : 0.0);
    *s = (hi - lo) / (double)((1 << z->bits) - 1);
    *zero = *s > 0.0 ? nearbyint(-lo / *s) : 0.0;
}

/* The grid's integer range: [qlo, qhi] of round(x/s) + zero. */
static void grid_range(const dfl_quantizer *z, double *qlo, double *qhi)
{
    if (z->asym) {
        *qlo = 0.0;
        *qhi = (double)((1 << z->bits) - 1);
    } else {
        *qhi = (double)((1 << (z->bits - 1)) - 1);
        *qlo = -*qhi;
    }
}

/* The integer j (grid point s·j) nearest to x, exactly. r = x·(1/s) is within a few ulp of
 * x/s, so unless its fraction is within 1e-6 of ½ the nearer of floor(r) and the next
 * integer is plain; near ½ the two are told apart by the sign of 2x − s·(2j + 1), which
 * one fma computes with a single rounding (so its sign, and a zero for a true tie, are
 * exact), a tie going to the even one. floor(r) off by one near an integer still leaves
 * the nearest among the two. NaN and huge values pass through (the clamp takes the huge). */
static double nearest_int(double x, double s, double inv)
{
    double r = x * inv;
    if (!(fabs(r) < 4e15)) return r;
    double j = (double)(int64_t)r;
    j -= (double)(j > r); /* floor, without a branch (the signs are random) */
    double f = r - j, q = j + (double)(f > 0.5);
    if (fabs(f - 0.5) <= 1e-6) { /* rare: decide exactly */
        double e = fma(-s, 2.0 * j + 1.0, 2.0 * x);
        q = e > 0.0 || (e == 0.0 && fmod(fabs(j), 2.0) == 1.0) ? j + 1.0 : j;
    }
    return q;
}

/* x[i·stride], i < d → its grid point, one value at a time (exact everywhere). */
static void apply_exact(float *x, int64_t d, int64_t stride, double s, double inv, double lo, double hi)
{
    for (int64_t i = 0; i < d; i++) {
        double j = nearest_int((double)x[i * stride], s, inv);
        j = j < lo ? lo : j > hi ? hi : j;
        x[i * stride] = (float)(s * j);
    }
}

#define RNE_MAGIC 6755399441055744.0 /* 1.5·2^52: (r + M) − M is r rounded half to even, |r| < 2^51 */

/* x[i·stride], i < d → its grid point s·clamp(j, lo, hi), j the integer nearest x/s
 * (lo, hi: the grid's integers less the zero point). Contiguous groups take a vectorised
 * pass (r = x·(1/s) rounded by the magic-number addition); a value whose r sits within
 * 1e-6 of a half-integer (or is huge, or NaN) is left as it is there, and the group then
 * goes through apply_exact, which leaves the values already on the grid where they are. */
static void apply_group(float *x, int64_t d, int64_t stride, double s, double zero, const dfl_quantizer *z)
{
    if (!(s > 0.0)) return;
    double qlo, qhi, inv = 1.0 / s;
    grid_range(z, &qlo, &qhi);
    const double lo = qlo - zero, hi = qhi - zero;
    if (stride != 1) {
        apply_exact(x, d, stride, s, inv, lo, hi);
        return;
    }
    int doubt = 0;
#pragma omp simd reduction(| : doubt)
    for (int64_t i = 0; i < d; i++) {
        double r = (double)x[i] * inv, j = (r + RNE_MAGIC) - RNE_MAGIC;
        int near = !(fabs(r) < 1e15) || fabs(fabs(r - j) - 0.5) <= 1e-6;
        j = j < lo ? lo : j > hi ? hi : j;
        x[i] = near ? x[i] : (float)(s * j);
        doubt |= near;
    }
    if (doubt) apply_exact(x, d, 1, s, inv, lo, hi);
}

static void minmax(const float *x, int64_t d, int64_t stride, double *lo, double *hi)
{
    float a = x[0], b = x[0];
    for (int64_t i = 1; i < d; i++) {
        float v = x[i * stride];
        a = v < a ? v : a;
        b = v > b ? v : b;
    }
    *lo = a;
    *hi = b;
}

void dfl_quant_groups(float *x, int64_t n, int64_t d, int64_t gstride, int64_t stride, const dfl_quantizer *qz)
{
    if (!qz->bits || d < 1) return;
    for (int64_t g = 0; g < n; g++) {
        float *p = x + g * gstride;
        double lo, hi, s, zero;
        minmax(p, d, stride, &lo, &hi);
        group_params(lo, hi, qz, &s, &zero);
        apply_group(p, d, stride, s, zero, qz);
    }
}

void dfl_quant_group_naive(float *x, int64_t d, int64_t stride, const dfl_quantizer *qz)
{
    if (!qz->bits || d < 1) return;
    double lo = x[0], hi = x[0], s, zero, qlo, qhi;
    for (int64_t i = 0; i < d; i++) {
        lo = fmin(lo, (double)x[i * stride]);
        hi = fmax(hi, (double)x[i * stride]);
    }
    group_params(lo, hi, qz, &s, &zero);
    if (!(s > 0.0)) return;
    grid_range(qz, &qlo, &qhi);
    for (int64_t i = 0; i < d; i++) {
        /* grid integers j = k − zero ascending; j is nearer than the best b < j when
         * 2v − s·(j + b) > 0 (one fma: the sign is exact), a tie (0) going to the even one */
        double v = x[i * stride], b = qlo - zero;
        for (double j = b + 1.0; j <= qhi - zero; j++) {
            double e = fma(-s, j + b, 2.0 * v);
            if (e > 0.0 || (e == 0.0 && fmod(fabs(j), 2.0) == 0.0)) b = j;
        }
        x[i * stride] = (float)(s * b);
    }
}

/* ------------------------------------------------------------- Hadamard */

#define PALEY_MAX 1024 /* the largest Paley factor m (stack tables of m entries) */

static int is_prime(int64_t p)
{
    if (p < 2) return 0;
    for (int64_t i = 2; i * i <= p; i++)
        if (p % i == 0) return 0;
    return 1;
}

int dfl_hadamard_ok(int64_t n, int64_t *m)
{
    if (n < 1) return 0;
    if ((n & (n - 1)) == 0) {
        *m = 1;
        return 1;
    }
    /* n = m·2^k with m = p + 1, p prime ≡ 3 (mod 4): the smallest such m */
    for (int64_t mm = 4; mm <= PALEY_MAX && mm <= n; mm += 4) {
        if (n % mm) continue;
        int64_t r = n / mm;
        if ((r & (r - 1)) == 0 && is_prime(mm - 1) && (mm - 1) % 4 == 3) {
            *m = mm;
            return 1;
        }
    }
    return 0;
}

/* x[n] → x·H_n (Sylvester, unnormalised), n a power of two: the fast Walsh–Hadamard
 * transform in natural order. */
static void fwht(float *x, int64_t n)
{
    for (int64_t h = 1; h < n; h *= 2)
        for (int64_t i = 0; i < n; i += 2 * h)
            for (int64_t j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
}

/* Paley I's H_m (m = p + 1, p prime ≡ 3 mod 4): H = I + S, S = [[0, 1ᵀ], [−1, Q]] with
 * Jacobsthal's Q[i][j] = χ(j − i) (χ the quadratic character mod p). chi[p] holds χ. */
static float paley(const signed char *chi, int64_t p, int64_t a, int64_t c)
{
    if (a == c || a == 0) return 1.0f;
    if (c == 0) return -1.0f;
    return (float)chi[((c - a) % p + p) % p];
}

static void paley_chi(signed char *chi, int64_t p)
{
    for (int64_t i = 0; i < p; i++)
        chi[i] = -1;
    chi[0] = 0;
    for (int64_t i = 1; i < p; i++)
        chi[(i * i) % p] = 1;
}

/* One row x[n] → x·(H_m ⊗ H_{n/m})/√n, b = n/m: FWHT on each of the m runs of b values,
 * then out[c·b + j] = Σ_a H_m[a][c]·x[a·b + j]. With pm (H_m as floats, [m, m]) and
 * acc[n]: accumulated a run at a time (vectorises over j); without them (no memory):
 * entry by entry from chi, tmp[m]. */
static void hadamard_row(float *x, int64_t n, int64_t m, const signed char *chi, float *tmp, const float *pm,
                         float *acc)
{
    const int64_t b = n / m;
    for (int64_t a = 0; a < m; a++)
        fwht(x + a * b, b);
    if (m > 1 && pm && acc) {
        memset(acc, 0, (size_t)n * sizeof *acc);
        for (int64_t a = 0; a < m; a++)
            for (int64_t c = 0; c < m; c++) {
                const float h = pm[a * m + c], *src = x + a * b;
                float *dst = acc + c * b;
#pragma omp simd
                for (int64_t j = 0; j < b; j++)
                    dst[j] += h * src[j];
            }
        memcpy(x, acc, (size_t)n * sizeof *x);
    } else if (m > 1) {
        for (int64_t d = 0; d < b; d++) {
            for (int64_t c = 0; c < m; c++) {
                double s = 0.0;
                for (int64_t a = 0; a < m; a++)
                    s += (double)x[a * b + d] * paley(chi, m - 1, a, c);
                tmp[c] = (float)s;
            }
            for (int64_t c = 0; c < m; c++)
                x[c * b + d] = tmp[c];
        }
    }
    const float r = (float)(1.0 / sqrt((double)n));
    for (int64_t i = 0; i < n; i++)
        x[i] *= r;
}

/* What the rows of one Hadamard call share: H_m's factor m, its character table, and (when
 * they could be allocated, outside any parallel region) H_m as floats and one accumulator
 * of n floats per thread. */
typedef struct hadamard_plan {
    int64_t n, m;
    signed char chi[PALEY_MAX];
    float *pm, *acc;
} hadamard_plan;

static void plan_make(hadamard_plan *h, int64_t n)
{
    memset(h, 0, sizeof *h);
    h->n = n;
    if (!dfl_hadamard_ok(n, &h->m)) h->m = 0;
    if (h->m <= 1) return;
    paley_chi(h->chi, h->m - 1);
    size_t nth = (size_t)omp_get_max_threads();
    if (omp_in_parallel()) return; /* no allocation inside a parallel region: the slow path */
    h->pm = dfl__alloc_array((size_t)(h->m * h->m), sizeof *h->pm);
    h->acc = dfl__alloc_array(nth * (size_t)n, sizeof *h->acc);
    for (int64_t a = 0; h->pm && a < h->m; a++)
        for (int64_t c = 0; c < h->m; c++)
            h->pm[a * h->m + c] = paley(h->chi, h->m - 1, a, c);
}

static void plan_free(hadamard_plan *h)
{
    free(h->pm);
    free(h->acc);
}

/* Row x[n] by plan h, from thread `thread`. */
static void plan_row(const hadamard_plan *h, float *x, int thread)
{
    float tmp[PALEY_MAX];
    hadamard_row(x, h->n, h->m, h->chi, tmp, h->pm, h->acc ? h->acc + (size_t)thread * (size_t)h->n : NULL);
}

void dfl_hadamard_rows(float *x, int64_t rows, int64_t n)
{
    hadamard_plan h;
    plan_make(&h, n);
    if (h.m) {
#pragma omp parallel for schedule(static) if (rows > 8 && !omp_in_parallel())
        for (int64_t r = 0; r < rows; r++)
            plan_row(&h, x + r * n, omp_get_thread_num());
    }
    plan_free(&h);
}

/* ------------------------------------------------------------ forward hooks */

/* The whole of x[n, d] with one scale (min and max over it). */
static void quant_tensor(float *x, int64_t n, int64_t d, const dfl_quantizer *z)
{
    size_t all = (size_t)n * (size_t)d;
    float lo = x[0], hi = x[0];
#pragma omp parallel for reduction(min : lo) reduction(max : hi) schedule(static) if (all > 65536)
    for (size_t i = 0; i < all; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    double s, zero;
    group_params(lo, hi, z, &s, &zero);
#pragma omp parallel for schedule(static) if (n > 8)
    for (int64_t r = 0; r < n; r++)
        apply_group(x + r * d, d, 1, s, zero, z);
}

const float *dfl_quant_input(const dfl_qspec *q, dfl_quant_site site, const float *x, float *buf, int64_t n, int64_t d)
{
    if (!q) return x;
    int rot = q->rotate && site == DFL_QSITE_DOWN_IN;
    if (!rot && !q->a.bits) return x;
    if (buf != x) memcpy(buf, x, (size_t)n * (size_t)d * sizeof *buf);
    if (rot) dfl_hadamard_rows(buf, n, d);
    if (q->a.bits && q->a_tensor) quant_tensor(buf, n, d, &q->a);
    if (q->a.bits && !q->a_tensor) {
#pragma omp parallel for schedule(static) if (n > 8)
        for (int64_t r = 0; r < n; r++)
            dfl_quant_groups(buf + r * d, 1, d, d, 1, &q->a);
    }
    return buf;
}

void dfl_quant_kv(const dfl_qspec *q, float *qm, int64_t q_ld, int64_t nqh, float *k, int64_t k_ld, int64_t nkh,
                  int64_t hd, float *v, int64_t v_ld, int64_t vd, int64_t T)
{
    if (!q || (!q->k.bits && !q->v.bits && !q->k_hadamard)) return;
    hadamard_plan h;
    plan_make(&h, q->k_hadamard ? hd : 1);
#pragma omp parallel for schedule(static) if (T > 8)
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; h.m && q->k_hadamard && i < nqh + nkh; i++)
            plan_row(&h, i < nqh ? qm + t * q_ld + i * hd : k + t * k_ld + (i - nqh) * hd, omp_get_thread_num());
        dfl_quant_groups(k + t * k_ld, nkh, hd, hd, 1, &q->k);
        dfl_quant_groups(v + t * v_ld, v_ld / vd, vd, vd, 1, &q->v);
    }
    plan_free(&h);
}

/* ------------------------------------------------------- the weight pass */

/* The load-time pass over one model: where new buffers are recorded. */
typedef struct wpass {
    dfl_model *m;
    size_t cap; /* capacity of m->owned */
    dfl_error *err;
} wpass;

/* A buffer of n floats the model owns. */
static float *owned(wpass *p, size_t n)
{
    float *b = dfl__model_owned_buffer(p->m, &p->cap, n);
    if (!b) dfl__fail(p->err, DFL_ERR_NOMEM, "--quantize: out of memory for a copy of %zu weights", n);
    return b;
}

/* Replace *w by an f32 copy (rows in Hugging Face order) that the model owns. */
static dfl_status materialise(wpass *p, dfl_wmat *w)
{
    size_t n;
    if (!dfl__mul_ok((size_t)w->rows, (size_t)w->cols, &n))
        return dfl__fail(p->err, DFL_ERR_NOMEM, "--quantize: a %lld × %lld matrix is too large", (long long)w->rows,
                         (long long)w->cols);
    float *b = owned(p, n);
    if (!b) return DFL_ERR_NOMEM;
    dfl_wmat_rows(w, 0, w->rows, b);
    w->data = b;
    w->dtype = DFL_DTYPE_F32;
    w->pair_hd = 0;
    return DFL_OK;
}

/* W[rows, cols] (f32, owned) → W·diag(g): the RMSNorm gain folded into the input side. */
static void fold_gain(dfl_wmat *w, const float *g)
{
    float *x = (float *)w->data;
    if (!g) return;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < w->rows; r++)
        for (int64_t c = 0; c < w->cols; c++)
            x[r * w->cols + c] *= g[c];
}

/* W[rows, cols] → Qᵀ·W (Q = H_rows/√rows): each column c → (columnᵀ·Q)ᵀ, through a
 * transposed copy. */
static dfl_status rotate_out(wpass *p, dfl_wmat *w)
{
    size_t n = (size_t)w->rows * (size_t)w->cols;
    float *t = dfl__alloc_array(n, sizeof *t), *x = (float *)w->data;
    if (!t) return dfl__fail(p->err, DFL_ERR_NOMEM, "--quantize rotate: out of memory for %zu floats", n);
    for (int64_t r = 0; r < w->rows; r++)
        for (int64_t c = 0; c < w->cols; c++)
            t[c * w->rows + r] = x[r * w->cols + c];
    dfl_hadamard_rows(t, w->cols, w->rows);
    for (int64_t r = 0; r < w->rows; r++)
        for (int64_t c = 0; c < w->cols; c++)
            x[r * w->cols + c] = t[c * w->rows + r];
    free(t);
    return DFL_OK;
}

/* A gain vector of ones (the folded norms'), owned by the model. */
static float *ones(wpass *p, int64_t D)
{
    float *g = owned(p, (size_t)D);
    for (int64_t i = 0; g && i < D; i++)
        g[i] = 1.0f;
    return g;
}

/* Why the rotation cannot run on this model, or NULL. */
static const char *rotate_refusal(const dfl_model *m)
{
    const dfl__family *f = dfl__family_of(&m->config);
    if (f->norm == DFL__NORM_LAYER)
        return "its LayerNorm subtracts the mean, which a rotation of the residual stream does not commute with "
               "(SliceGPT's mean folding is not implemented)";
    if (f->block != DFL__BLOCK_PRE)
        return "its norms after the attention and MLP act on the branch before the residual addition, so their "
               "gains cannot be folded into the next weights";
    if (f->norm != DFL__NORM_RMS) return "its RMSNorm gains are stored as 1 + w";
    if (m->pos_embed.data) return "it has learned position embeddings";
    return NULL;
}

/* Fold the norms and rotate the residual stream by Q = H_D/√D, and down_proj's input by
 * H_F/√F (quantize.h). */
static dfl_status rotate_model(wpass *p)
{
    dfl_model *m = p->m;
    const dfl_config *c = &m->config;
    const int64_t D = c->hidden_size, F = c->intermediate_size;
    int64_t f;
    const char *why = rotate_refusal(m);
    if (why) return dfl__fail(p->err, DFL_ERR_USAGE, "--quantize rotate: model_type %s: %s", c->model_type, why);
    if (!dfl_hadamard_ok(D, &f) || !dfl_hadamard_ok(F, &f))
        return dfl__fail(p->err, DFL_ERR_USAGE,
                         "--quantize rotate: hidden_size %lld and intermediate_size %lld must each be 2^k or m·2^k "
                         "with m − 1 a prime ≡ 3 (mod 4), m <= %d (a Hadamard matrix of that order)",
                         (long long)D, (long long)F, PALEY_MAX);
    float *one = ones(p, D);
    if (!one) return DFL_ERR_NOMEM;
    dfl_status s = DFL_OK;
    for (int64_t l = 0; l < c->num_layers && !s; l++) {
        dfl_layer_weights *lw = &m->layers[l];
        dfl_wmat *in_attn[] = {&lw->wq, &lw->wk, &lw->wv, &lw->w_lambda}, *in_mlp[] = {&lw->w_gate, &lw->w_up};
        for (int i = 0; i < 4 && !s; i++) {
            if (!in_attn[i]->data || (s = materialise(p, in_attn[i]))) continue;
            fold_gain(in_attn[i], lw->attn_norm);
            dfl_hadamard_rows((float *)in_attn[i]->data, in_attn[i]->rows, D);
        }
        for (int i = 0; i < 2 && !s; i++) {
            if ((s = materialise(p, in_mlp[i]))) continue;
            fold_gain(in_mlp[i], lw->mlp_norm);
            dfl_hadamard_rows((float *)in_mlp[i]->data, in_mlp[i]->rows, D);
        }
        if (!s && !(s = materialise(p, &lw->wo))) s = rotate_out(p, &lw->wo);
        if (!s && !(s = materialise(p, &lw->w_down))) {
            dfl_hadamard_rows((float *)lw->w_down.data, D, F); /* W_down·H_F: the online rotation's offline half */
            s = rotate_out(p, &lw->w_down);
        }
        lw->attn_norm = lw->mlp_norm = one;
    }
    if (s) return s;
    /* the LM head before the embeddings: tied, both are views of one matrix */
    if ((s = materialise(p, &m->lm_head))) return s;
    fold_gain(&m->lm_head, m->final_norm);
    dfl_hadamard_rows((float *)m->lm_head.data, m->lm_head.rows, D);
    m->final_norm = one;
    if ((s = materialise(p, &m->embed))) return s;
    dfl_hadamard_rows((float *)m->embed.data, m->embed.rows, D);
    return DFL_OK;
}

/* Fake-quantize one matrix (materialised first): groups of w_group input columns (or
 * whole rows) of each output channel. io: stored [in, out] (GPT-2's Conv1D). */
static dfl_status quant_matrix(wpass *p, const dfl_qspec *q, dfl_wmat *w, int io, int owned_already)
{
    if (!w->data) return DFL_OK;
    dfl_status s = owned_already ? DFL_OK : materialise(p, w);
    if (s) return s;
    const int64_t out = io ? w->cols : w->rows, in = io ? w->rows : w->cols;
    const int64_t so = io ? 1 : w->cols, si = io ? w->cols : 1;
    const int64_t g = q->w_group ? q->w_group : in;
    float *x = (float *)w->data;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < out; o++)
        dfl_quant_groups(x + o * so, in / g, g, g * si, si, &q->w);
    return DFL_OK;
}

dfl_status dfl_quant_model(dfl_model *m, const dfl_qspec *q, dfl_error *err)
{
    if (!dfl_qspec_any(q)) return DFL_OK;
    const dfl_config *c = &m->config;
    int64_t f;
    if (q->k_hadamard && !dfl_hadamard_ok(c->head_dim, &f))
        return dfl__fail(err, DFL_ERR_USAGE,
                         "--quantize k=…:hadamard: head_dim %lld must be 2^k or m·2^k with m − 1 a prime ≡ 3 (mod 4)",
                         (long long)c->head_dim);
    const dfl__family *fam = dfl__family_of(c);
    const int io = fam->layout == DFL__LAYOUT_GPT2;
    if (q->w.bits && q->w_group) {
        /* every matrix's input width must be a multiple of the group */
        const dfl_layer_weights *lw = &m->layers[0];
        const dfl_wmat *all[] = {&lw->wq, &lw->wo, &lw->w_up, &lw->w_down, &lw->wqkv, &m->lm_head};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
            int64_t in = io && all[i] != &m->lm_head ? all[i]->rows : all[i]->cols;
            if (all[i]->data && in % q->w_group)
                return dfl__fail(err, DFL_ERR_USAGE,
                                 "--quantize weights=…:group=%lld: an input width of %lld is not a multiple of it",
                                 (long long)q->w_group, (long long)in);
        }
    }
    wpass p = {m, m->n_owned, err};
    dfl_status s = q->rotate ? rotate_model(&p) : DFL_OK;
    if (s || !q->w.bits) return s;
    const int rotated = q->rotate;
    const void *embed0 = m->embed.data;
    for (int64_t l = 0; l < c->num_layers && !s; l++) {
        dfl_layer_weights *lw = &m->layers[l];
        /* GPT-2's Conv1D matrices (c_attn, c_proj, c_fc, mlp.c_proj) are stored [in, out] */
        dfl_wmat *mats[] = {&lw->wq,   &lw->wk, &lw->wv,   &lw->w_gate, &lw->w_lambda,
                            &lw->wqkv, &lw->wo, &lw->w_up, &lw->w_down};
        const int conv1d[] = {0, 0, 0, 0, 0, io, io, io, io};
        for (size_t i = 0; i < sizeof mats / sizeof *mats && !s; i++)
            s = quant_matrix(&p, q, mats[i], conv1d[i], rotated);
    }
    if (s) return s;
    int tied_view = m->lm_head.data == embed0;
    if (q->w_head) s = quant_matrix(&p, q, &m->lm_head, 0, rotated);
    if (!s && q->w_embed) {
        if (tied_view && q->w_head && !rotated)
            m->embed = m->lm_head; /* one quantized copy for the tied pair */
        else
            s = quant_matrix(&p, q, &m->embed, 0, rotated);
        if (!s) s = quant_matrix(&p, q, &m->pos_embed, 0, 0);
    }
    return s;
}
