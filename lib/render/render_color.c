/* render_color.c — colormaps from their published tables, value scales (linear, log,
 * sqrt; symmetric around 0 for diverging maps) and tick placement. Hand-written as
 * cairo has none of these: lookups match matplotlib's so colours equal its imshow. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/cli.h"
#include "render/render_internal.h"

/* --------------------------------------------------------------- colormaps */

static const char *const cmap_names[] = {"viridis", "magma", "rdbu"};

const char *dfl_cmap_name(dfl_cmap m)
{
    return (unsigned)m < 3 ? cmap_names[m] : "?";
}

dfl_status dfl_cmap_parse(const char *name, dfl_cmap *out, dfl_error *err)
{
    int i = dfl__name_index(name, cmap_names, 3);
    if (i < 0) return dfl__fail(err, DFL_ERR_USAGE, "colormap '%s' is not viridis, magma or rdbu", name);
    *out = (dfl_cmap)i;
    return DFL_OK;
}

int dfl_cmap_is_diverging(dfl_cmap m)
{
    return m == DFL_CMAP_RDBU;
}

static uint8_t to_byte(double v)
{
    double b = floor(v * 255.0 + 0.5);
    return (uint8_t)(b < 0 ? 0 : b > 255 ? 255 : b);
}

/* RdBu reversed (blue for low, red for high), 256 entries linearly interpolated between
 * the 11 anchors in sRGB, as matplotlib builds its LinearSegmentedColormap. */
static dfl_rgb rdbu_r(int i)
{
    double x = (double)i / 255.0 * 10.0;
    int k = (int)x;
    if (k >= 10) k = 9;
    double f = x - k;
    /* anchors run red -> blue; reversed: entry 0 is anchor 10 */
    const uint8_t *a = dfl__cmap_rdbu_anchors[10 - k], *b = dfl__cmap_rdbu_anchors[9 - k];
    dfl_rgb c = {to_byte(((1 - f) * a[0] + f * b[0]) / 255.0), to_byte(((1 - f) * a[1] + f * b[1]) / 255.0),
                 to_byte(((1 - f) * a[2] + f * b[2]) / 255.0)};
    return c;
}

dfl_rgb dfl_cmap_entry(dfl_cmap m, int i)
{
    if (i < 0) i = 0;
    if (i > 255) i = 255;
    const float(*t)[3] = NULL;
    switch (m) {
    case DFL_CMAP_VIRIDIS: t = dfl__cmap_viridis; break;
    case DFL_CMAP_MAGMA: t = dfl__cmap_magma; break;
    case DFL_CMAP_RDBU: return rdbu_r(i);
    }
    if (!t) t = dfl__cmap_viridis;
    dfl_rgb c = {to_byte(t[i][0]), to_byte(t[i][1]), to_byte(t[i][2])};
    return c;
}

dfl_rgb dfl_cmap_color(dfl_cmap m, double t)
{
    if (!(t > 0)) return dfl_cmap_entry(m, 0); /* also NaN */
    int i = t >= 1 ? 255 : (int)(t * 256.0);
    return dfl_cmap_entry(m, i);
}

/* ------------------------------------------------------------ value scales */

static const char *const scale_names[] = {"linear", "log", "sqrt"};

const char *dfl_scale_name(dfl_scale s)
{
    return (unsigned)s < 3 ? scale_names[s] : "?";
}

dfl_status dfl_scale_parse(const char *name, dfl_scale *out, dfl_error *err)
{
    int i = dfl__name_index(name, scale_names, 3);
    if (i < 0) return dfl__fail(err, DFL_ERR_USAGE, "scale '%s' is not linear, log or sqrt", name);
    *out = (dfl_scale)i;
    return DFL_OK;
}

dfl_status dfl_norm_check(const dfl_norm *n, dfl_error *err)
{
    if (!isfinite(n->vmin) || !isfinite(n->vmax))
        return dfl__fail(err, DFL_ERR_USAGE, "colour limits must be finite (vmin %g, vmax %g)", n->vmin, n->vmax);
    if (n->diverging) {
        if (!(n->vmax > 0)) return dfl__fail(err, DFL_ERR_USAGE, "a diverging scale needs vmax > 0 (got %g)", n->vmax);
        return DFL_OK;
    }
    if (!(n->vmin < n->vmax)) return dfl__fail(err, DFL_ERR_USAGE, "vmin %g must be below vmax %g", n->vmin, n->vmax);
    if (n->scale == DFL_SCALE_LOG && !(n->vmin > 0))
        return dfl__fail(err, DFL_ERR_USAGE, "a log scale needs vmin > 0 (got %g)", n->vmin);
    return DFL_OK;
}

static double clamp01(double t)
{
    return t < 0 ? 0 : t > 1 ? 1 : t;
}

static double linthresh(const dfl_norm *n)
{
    return n->linthresh > 0 ? n->linthresh : n->vmax / 1000.0;
}

/* symmetric log: sign(v)·log1p(|v|/c), the usual symlog with a linear core */
static double symlog(double v, double c)
{
    return v < 0 ? -log1p(-v / c) : log1p(v / c);
}

double dfl_norm_apply(const dfl_norm *n, double v)
{
    if (isnan(v)) return v;
    if (n->diverging) {
        double m = n->vmax, u;
        switch (n->scale) {
        case DFL_SCALE_LOG: u = symlog(v, linthresh(n)) / symlog(m, linthresh(n)); break;
        case DFL_SCALE_SQRT: u = (v < 0 ? -sqrt(-v) : sqrt(v)) / sqrt(m); break;
        default: u = v / m; break;
        }
        return clamp01(0.5 + 0.5 * u);
    }
    switch (n->scale) {
    case DFL_SCALE_LOG:
        if (!(v > 0)) return 0;
        return clamp01((log(v) - log(n->vmin)) / (log(n->vmax) - log(n->vmin)));
    case DFL_SCALE_SQRT: {
        double u = v < n->vmin ? 0 : (v - n->vmin) / (n->vmax - n->vmin);
        return clamp01(sqrt(clamp01(u)));
    }
    default: return clamp01((v - n->vmin) / (n->vmax - n->vmin));
    }
}

double dfl_norm_invert(const dfl_norm *n, double t)
{
    t = clamp01(t);
    if (n->diverging) {
        double u = 2 * t - 1, m = n->vmax, a = fabs(u);
        double r;
        switch (n->scale) {
        case DFL_SCALE_LOG: r = linthresh(n) * expm1(a * symlog(m, linthresh(n))); break;
        case DFL_SCALE_SQRT: r = a * a * m; break;
        default: r = a * m; break;
        }
        return u < 0 ? -r : r;
    }
    switch (n->scale) {
    case DFL_SCALE_LOG: return exp(log(n->vmin) + t * (log(n->vmax) - log(n->vmin)));
    case DFL_SCALE_SQRT: return n->vmin + t * t * (n->vmax - n->vmin);
    default: return n->vmin + t * (n->vmax - n->vmin);
    }
}

/* ------------------------------------------------------------------- ticks */

int dfl_ticks_linear(double lo, double hi, int max_ticks, double *out, int cap, double *step_out)
{
    if (!(hi > lo) || max_ticks < 1 || cap < 1) {
        if (cap >= 1 && isfinite(lo)) {
            out[0] = lo;
            if (step_out) *step_out = 0;
            return 1;
        }
        return 0;
    }
    static const double mult[] = {1, 2, 2.5, 5, 10};
    double raw = (hi - lo) / (max_ticks > 1 ? max_ticks - 1 : 1);
    double mag = pow(10, floor(log10(raw)));
    double step = 10 * mag;
    for (int i = 0; i < 5; i++)
        if (mult[i] * mag >= raw * (1 - 1e-9)) {
            step = mult[i] * mag;
            break;
        }
    int n = 0;
    /* i·step avoids drift; the 1e-9 slack keeps end points that are exact multiples */
    double first = ceil(lo / step - 1e-9);
    for (double k = first; n < cap; k++) {
        double v = k * step;
        if (v > hi + fabs(step) * 1e-9) break;
        out[n++] = fabs(v) < step * 1e-9 ? 0.0 : v;
    }
    if (step_out) *step_out = step;
    return n;
}

int dfl_ticks_log(double lo, double hi, int max_ticks, double *out, int cap)
{
    if (!(lo > 0) || !(hi > lo) || cap < 1 || max_ticks < 1) return 0;
    int e0 = (int)ceil(log10(lo) - 1e-9), e1 = (int)floor(log10(hi) + 1e-9);
    int every = 1;
    while ((e1 - e0) / every + 1 > max_ticks)
        every++;
    int n = 0;
    for (int e = e0; e <= e1 && n < cap; e += every)
        out[n++] = pow(10, e);
    return n;
}

int dfl_ticks_for_norm(const dfl_norm *nm, int max_ticks, double *out, int cap)
{
    if (nm->diverging && nm->scale == DFL_SCALE_LOG) {
        /* 0 and the decades on both sides down to the linear threshold */
        double pos[32];
        int k = dfl_ticks_log(linthresh(nm) * 10, nm->vmax, max_ticks / 2 > 0 ? max_ticks / 2 : 1, pos, 32);
        int n = 0;
        for (int i = k - 1; i >= 0 && n < cap; i--)
            out[n++] = -pos[i];
        if (n < cap) out[n++] = 0;
        for (int i = 0; i < k && n < cap; i++)
            out[n++] = pos[i];
        return n;
    }
    if (nm->diverging) return dfl_ticks_linear(-nm->vmax, nm->vmax, max_ticks, out, cap, NULL);
    if (nm->scale == DFL_SCALE_LOG) {
        int n = dfl_ticks_log(nm->vmin, nm->vmax, max_ticks, out, cap);
        if (n >= 2) return n;
        /* less than two decades in range: fall back to linear steps */
    }
    return dfl_ticks_linear(nm->vmin, nm->vmax, max_ticks, out, cap, NULL);
}

void dfl_tick_label(double v, char *buf, size_t cap)
{
    double a = fabs(v);
    if (v == 0)
        snprintf(buf, cap, "0");
    else if (a >= 1e-3 && a < 1e5)
        snprintf(buf, cap, "%.4g", v);
    else {
        /* 1e-05 style, mantissa dropped when it is 1 */
        int e = (int)floor(log10(a) + 1e-9);
        double m = v / pow(10, e);
        if (fabs(fabs(m) - 1) < 1e-6)
            snprintf(buf, cap, "%se%d", v < 0 ? "-1" : "1", e);
        else
            snprintf(buf, cap, "%.3ge%d", m, e);
    }
    /* a minus sign that reads as one */
    if (buf[0] == '-' && strlen(buf) + 3 < cap) {
        memmove(buf + 3, buf + 1, strlen(buf));
        memcpy(buf, "\xe2\x88\x92", 3);
    }
}
