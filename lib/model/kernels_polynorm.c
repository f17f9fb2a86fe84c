/* kernels_polynorm.c — PolyNorm gated activation (kernels_polynorm.h). */
#include "model/kernels_polynorm.h"

#include <math.h>

/* One row: three passes (the three RMS scales, then the output), in double. */
static void polynorm_row(float *g, const float *u, int64_t f, const float *w, const float *b, double eps)
{
    double s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (int64_t j = 0; j < f; j++) {
        double x = g[j], x2 = x * x;
        s1 += x2;
        s2 += x2 * x2;
        s3 += x2 * x2 * x2;
    }
    double r1 = 1.0 / sqrt(s1 / (double)f + eps), r2 = 1.0 / sqrt(s2 / (double)f + eps);
    double r3 = 1.0 / sqrt(s3 / (double)f + eps);
    for (int64_t j = 0; j < f; j++) {
        double x = g[j];
        double y = w[0] * (x * x * x) * r3 + w[1] * (x * x) * r2 + w[2] * x * r1 + b[0];
        g[j] = (float)(y * u[j]);
    }
}

void dfl_polynorm_glu(float *g, const float *u, int64_t n, int64_t f, const float *w, const float *b, double eps)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        polynorm_row(g + i * f, u + i * f, f, w, b, eps);
}

/* The twin: each term normalised on its own, as the formula reads. */
void dfl_polynorm_glu_naive(float *g, const float *u, int64_t n, int64_t f, const float *w, const float *b, double eps)
{
    for (int64_t i = 0; i < n; i++) {
        float *row = g + i * f;
        double ms[3] = {0.0, 0.0, 0.0}; /* mean of (x^p)² for p = 1, 2, 3 */
        for (int p = 1; p <= 3; p++) {
            for (int64_t j = 0; j < f; j++) {
                double z = pow((double)row[j], p);
                ms[p - 1] += z * z;
            }
            ms[p - 1] /= (double)f;
        }
        for (int64_t j = 0; j < f; j++) {
            double x = row[j], y = b[0];
            for (int p = 3; p >= 1; p--)
                y += w[3 - p] * pow(x, p) / sqrt(ms[p - 1] + eps);
            row[j] = (float)(y * u[i * f + j]);
        }
    }
}
