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
 * The rows of a step's block are independent: large blocks are split among the threads (each entry still
 * has one update a step, so the threads never change a number). */

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

/* returns the step k of a pivot s_k <= 0 (x untouched), or -1 with x the unnormalised vector;
 * tmp: n entries of scratch */
static Py_ssize_t gth_run(Py_ssize_t n, double *restrict A, const int64_t *low, const int64_t *high,
                          double *restrict x, double *restrict tmp)
{
    for (Py_ssize_t k = 0; k < n - 1; k++) {
        const double *ak = A + k * n;
        Py_ssize_t r = (Py_ssize_t)low[k] + 1, c = (Py_ssize_t)high[k] + 1;
        double scale = gth_sum(ak + k + 1, c - k - 1);
        if (scale <= 0) return k;
        if (r > k + 1 && c > k + 1) {
            int nt = (double)(r - k - 1) * (double)(c - k - 1) >= 65536.0 ? nthreads : 1;
            (void)nt;
            _Pragma("omp parallel for schedule(static) num_threads(nt)")
            for (Py_ssize_t i = k + 1; i < r; i++) {
                double *ai = A + i * n;
                double ci = ai[k] / scale;
                ai[k] = ci;
                for (Py_ssize_t j = k + 1; j < c; j++) ai[j] += ci * ak[j];
            }
        }
    }
    if (n == 0) return -1;
    memset(x, 0, (size_t)n * sizeof(double));
    x[n - 1] = 1.0;
    for (Py_ssize_t k = n - 2; k >= 0; k--) {
        Py_ssize_t r = (Py_ssize_t)low[k] + 1;
        for (Py_ssize_t i = k + 1; i < r; i++) tmp[i - k - 1] = x[i] * A[i * n + k];
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
    PyObject *o[4];
    Py_buffer b[4];                        /* A, low, high, x */
    if (!PyArg_ParseTuple(args, "OOOO", &o[0], &o[1], &o[2], &o[3])) return NULL;
    if (get_all(o, b, "DiiD", (const char *[]){"A", "low", "high", "x"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[3]);
    int ok = b[0].ndim == 2 && b[0].shape[0] == n && b[0].shape[1] == n && b[0].buf != b[3].buf
             && b[1].itemsize == 8 && b[2].itemsize == 8 && NELEM(b[1]) == n && NELEM(b[2]) == n;
    const int64_t *low = b[1].buf, *high = b[2].buf;
    for (Py_ssize_t k = 0; ok && k < n; k++)
        ok = low[k] >= k && low[k] < n && high[k] >= k && high[k] < n;
    PyObject *res = NULL;
    double *tmp = ok ? malloc((size_t)(n + 1) * sizeof(double)) : NULL;
    if (ok && !tmp) PyErr_NoMemory();
    else if (require(ok, "gth: A (n, n) float64 and x (n,) float64, both written; low and high (n,) int64 "
                         "with k <= low[k], high[k] < n")) {
        Py_ssize_t zero;
        Py_BEGIN_ALLOW_THREADS
        zero = gth_run(n, b[0].buf, low, high, b[3].buf, tmp);
        Py_END_ALLOW_THREADS
        res = PyLong_FromSsize_t(zero);
    }
    free(tmp);
    release_all(b, 4);
    return res;
}
