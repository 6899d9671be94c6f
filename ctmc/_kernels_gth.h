/* GTH elimination for a dense stationary vector (ctmc.linalg.gth_solve), included by _kernels.c (its helpers
 * get_all, require, release_all, NELEM, nthreads are in scope).
 *
 * A (n x n, C order, a private copy: overwritten) is eliminated within its envelope: step k scales column k
 * on rows k+1..low[k] by s_k = sum of row k on columns k+1..high[k], then adds col (x) row to that block;
 * the back-substitution makes x[k] = sum of x[i] a_ik over rows k+1..low[k], rescaling x[k:] by x[k]
 * when it passes 1. Every operation is numpy's in gth_solve's Python route, in the same order, so both
 * routes give the same numbers to the bit:
 *   - a sum is numpy's a.sum() of a contiguous float64 array: pairwise (8 accumulators up to 128
 *     entries, halves above) within blocks of 8192 entries (its buffer), the blocks added to 0 in order;
 *   - an update is a_ij + (c_i * r_j), rounded twice (compiled with -ffp-contract=off: no fused
 *     multiply-add); a quotient is one correctly rounded division.
 * The envelope is worked out here (the numpy route: linalg._envelope, the same integers).
 * The rows of a step's block are independent: large blocks are split among the threads (each entry still
 * has one update a step, so the threads never change a number). */

#include <math.h>

#define GTH_BUFSIZE 8192

static double gth_pairwise(const double *a, Py_ssize_t n)
{
    if (n < 8) {
        double res = -0.0;
        for (Py_ssize_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        Py_ssize_t i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return gth_pairwise(a, n2) + gth_pairwise(a + n2, n - n2);
}

static double gth_sum(const double *a, Py_ssize_t n)
{
    double s = 0.0;
    for (Py_ssize_t lo = 0; lo < n; lo += GTH_BUFSIZE)
        s += gth_pairwise(a + lo, n - lo < GTH_BUFSIZE ? n - lo : GTH_BUFSIZE);
    return s;
}

/* the envelope of linalg._envelope: low[k] the running maximum over columns j <= k of max(j, the last
 * nonzero row of column j), high[k] the same for the rows' last nonzero columns (row-major scans) */
static void gth_envelope(Py_ssize_t n, const double *A, Py_ssize_t *low, Py_ssize_t *high)
{
    for (Py_ssize_t j = 0; j < n; j++) low[j] = j;
    for (Py_ssize_t i = 0; i < n; i++) {
        const double *ai = A + i * n;
        for (Py_ssize_t j = 0; j < i; j++)
            if (ai[j] != 0) low[j] = i;
        high[i] = i;
        for (Py_ssize_t j = n - 1; j > i; j--)
            if (ai[j] != 0) { high[i] = j; break; }
    }
    for (Py_ssize_t k = 1; k < n; k++) {
        if (low[k] < low[k - 1]) low[k] = low[k - 1];
        if (high[k] < high[k - 1]) high[k] = high[k - 1];
    }
}

/* returns the step k of a pivot s_k <= 0 (x untouched), or -1 with x the unnormalised vector;
 * low, high, tmp: n entries of scratch each */
static Py_ssize_t gth_run(Py_ssize_t n, double *restrict A, Py_ssize_t *low, Py_ssize_t *high,
                          double *restrict x, double *restrict tmp)
{
    gth_envelope(n, A, low, high);
    for (Py_ssize_t k = 0; k < n - 1; k++) {
        double *ak = A + k * n;
        Py_ssize_t r = (Py_ssize_t)low[k] + 1, c = (Py_ssize_t)high[k] + 1;
        double scale = gth_sum(ak + k + 1, c - k - 1);
        if (scale <= 0) return k;
        /* a row whose c_i is 0 is left as it is: a_ij + 0 r_j is a_ij but for the sign of a zero, which no
         * sum shows (each starts from +0), where the r_j are finite (as their finite sum says) */
        int skip = isfinite(scale);
        if (r > k + 1 && c > k + 1) {
            int nt = (double)(r - k - 1) * (double)(c - k - 1) >= 65536.0 ? nthreads : 1;
            (void)nt;
            _Pragma("omp parallel for schedule(static) num_threads(nt)")
            for (Py_ssize_t i = k + 1; i < r; i++) {
                double *ai = A + i * n;
                double ci = ai[k] / scale;
                ai[k] = tmp[i] = ci;
                if (ci == 0.0 && skip) continue;
                for (Py_ssize_t j = k + 1; j < c; j++) ai[j] += ci * ak[j];
            }
        }
        /* row k's upper part is read no more: it keeps column k's multipliers for the back-substitution
         * (a contiguous read instead of a stride of n) */
        for (Py_ssize_t i = k + 1; i < r; i++) A[k * n + i] = tmp[i];
    }
    if (n == 0) return -1;
    memset(x, 0, (size_t)n * sizeof(double));
    x[n - 1] = 1.0;
    for (Py_ssize_t k = n - 2; k >= 0; k--) {
        Py_ssize_t r = (Py_ssize_t)low[k] + 1;
        for (Py_ssize_t i = k + 1; i < r; i++) tmp[i - k - 1] = x[i] * A[k * n + i];
        x[k] = gth_sum(tmp, r - k - 1);
        if (x[k] > 1.0) {
            double d = x[k];
            for (Py_ssize_t i = k; i < n; i++) x[i] /= d;
        }
    }
    return -1;
}

static PyObject *py_gth(PyObject *self, PyObject *args)
{
    PyObject *o[2];
    Py_buffer b[2];                        /* A, x */
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1])) return NULL;
    if (get_all(o, b, "DD", (const char *[]){"A", "x"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[1]);
    PyObject *res = NULL;
    if (require(b[0].ndim == 2 && b[0].shape[0] == n && b[0].shape[1] == n && b[0].buf != b[1].buf,
                "gth: A (n, n) and x (n,), both written")) {
        Py_ssize_t *scratch = malloc((size_t)(2 * n + 1) * sizeof(Py_ssize_t));
        double *tmp = malloc((size_t)(n + 1) * sizeof(double));
        if (!scratch || !tmp) PyErr_NoMemory();
        else {
            Py_ssize_t zero;
            Py_BEGIN_ALLOW_THREADS
            zero = gth_run(n, b[0].buf, scratch, scratch + n, b[1].buf, tmp);
            Py_END_ALLOW_THREADS
            res = PyLong_FromSsize_t(zero);
        }
        free(scratch);
        free(tmp);
    }
    release_all(b, 2);
    return res;
}
