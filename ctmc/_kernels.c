/* The compiled vector kernels of the Krylov solvers (optional; numpy/pyamg fallbacks, same algorithms).
 *
 * cgs2     Arnoldi orthogonalisation of w against V[:j+1] by classical Gram-Schmidt twice, the
 *          passes fused by cache-sized blocks of rows: 3 reads of the basis instead of 4, the
 *          norm of the result computed in the last read.
 * project2, update2
 *          the two passes of one step of DCGS2 (Gram-Schmidt twice with the second pass delayed by
 *          one step): 2 reads of the basis a step.
 * combine  out = y @ V[:k] (the GMRES update).
 * spmv     out = A x for a CSR matrix (rows split among the threads).
 * ssor_setup, ssor
 *          SSOR(1) of a CSR matrix with sorted rows: the forward solve with D - L reads each
 *          row's entries before its diagonal, the backward solve with D - U those after it; no
 *          copy of the triangles (the position of each row's diagonal is kept instead).
 * ssor_ap  SSOR(1) and the product with A after it (Eisenstat's trick): A P v from the lower
 *          triangle and the forward solve's result, half a product's reads instead of one.
 * bicg_dir, bicg_half, dot2, bicg_update
 *          the vector work of a BiCGStab iteration in four passes (the last also the componentwise
 *          extremes of r / b that ctmc.krylov.bracket_factor tests).
 * bssor    block SSOR(1): the same two solves inside each of a fixed set of row blocks, the
 *          couplings between blocks taken from the forward solve's result (Jacobi between the
 *          blocks): the blocks run in parallel, and the result does not depend on the threads.
 * gs       a Gauss-Seidel / SOR sweep, forward or backward, pyamg's arithmetic (_kernels_gs.h).
 * gs_rows  the same over a list of rows in its order (no permuted copy of the matrix; _kernels_gs.h).
 * spmv_rows  the product over a list of rows (_kernels_gs.h).
 * gst      a Gauss-Seidel sweep on A^T x = b from the rows of A (no transpose; _kernels_gs.h).
 * exit_on_sigint (arm_sigint, sigint_armed)
 *          the command line's Ctrl-C: one line on standard error and exit status 130 at once, also
 *          inside a call that holds no GIL for long (SuperLU's factorisation), where Python's own
 *          handler would run only when the call returns. Armed by ctmc.cli only, never on import.
 *
 * Determinism: every reduction over rows is done per block of BLOCK rows (a partition that does
 * not depend on the number of threads) and the block sums are added in block order, so the
 * results do not depend on the thread count. The arithmetic is written out without fused
 * multiply-adds (built with -ffp-contract=off), like the fallbacks it is tested against.
 *
 * Buffers come through the buffer protocol (no numpy headers); the GIL is released while computing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <signal.h>
#include <unistd.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#else
#pragma GCC diagnostic ignored "-Wunknown-pragmas"      /* built without OpenMP: one thread, pragmas unused */
#endif

#ifndef BLOCK
#define BLOCK 4096                      /* rows of a block: the unit of every partition and reduction */
#endif
#ifndef SUB
#define SUB 1024                        /* rows of a sub-block of the cache-resident pass */
#endif
#define MIN_PARALLEL (16 * BLOCK)       /* fewer rows than this: one thread */

static int nthreads = 1;

static int threads_for(Py_ssize_t n) { return n >= MIN_PARALLEL ? nthreads : 1; }

/* ---- buffers ---------------------------------------------------------------------------------- */

/* kind: 'd' float64, 'i' an integer of 4 or 8 bytes */
static int get(PyObject *obj, Py_buffer *view, char kind, int writable, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    int ok;
    if (kind == 'd') ok = (*f == 'd' && view->itemsize == 8);
    else ok = (strchr("ilqn", *f) != NULL && (view->itemsize == 4 || view->itemsize == 8));
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: expected a contiguous %s array", name,
                     kind == 'd' ? "float64" : "int32/int64");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#define NELEM(v) ((v).len / (v).itemsize)

/* the buffers of objs[0..k-1] as spec says, one letter each: d float64, i int32/int64, upper case for
 * writable; names[i] for the messages. All of them, or none (-1, an exception set). */
static int get_all(PyObject *const *objs, Py_buffer *views, const char *spec, const char *const *names)
{
    for (int i = 0; spec[i]; i++) {
        char c = spec[i];
        int w = (c == 'D' || c == 'I');
        if (get(objs[i], &views[i], w ? (char)(c - 'A' + 'a') : c, w, names[i]) < 0) {
            while (i--) PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    return 0;
}

static void release_all(Py_buffer *views, int k)
{
    for (int i = 0; i < k; i++) PyBuffer_Release(&views[i]);
}

/* raise ValueError(msg) unless ok; returns ok */
static int require(int ok, const char *msg)
{
    if (!ok) PyErr_SetString(PyExc_ValueError, msg);
    return ok;
}

/* ---- vector pieces (fixed summation order) ---------------------------------------------------- */

/* The hot loops are also compiled for AVX2 where the compiler can (chosen at load time). The explicit
 * accumulators fix the order of every sum, so both versions give the same numbers to the last bit. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(CTMC_NO_CLONES)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

static inline double dot(const double *restrict a, const double *restrict b, Py_ssize_t n)
{
    double s[4] = {0, 0, 0, 0};
    Py_ssize_t n4 = n - n % 4;
    for (Py_ssize_t r = 0; r < n4; r += 4)
        for (int l = 0; l < 4; l++) s[l] += a[r + l] * b[r + l];
    for (Py_ssize_t r = n4; r < n; r++) s[0] += a[r] * b[r];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* out[i * stride] = dot(V_i, w) for the m rows V_i = V + i ld, four rows at a time (w loaded once for
 * four); the lanes l = 0..3 sum the entries r = l mod 4 like dot(), so the results are dot()'s */
static inline void dots(const double *restrict V, Py_ssize_t ld, Py_ssize_t m, const double *restrict w,
                        Py_ssize_t n, double *restrict out, Py_ssize_t stride, int reverse)
{
    Py_ssize_t i = 0, n4 = n - n % 4;
    for (; i + 4 <= m; i += 4) {
        Py_ssize_t i0 = reverse ? m - i - 4 : i;
        const double *a = V + i0 * ld, *b = a + ld, *c = b + ld, *d = c + ld;
        double sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0}, sc[4] = {0, 0, 0, 0}, sd[4] = {0, 0, 0, 0};
        for (Py_ssize_t r = 0; r < n4; r += 4)
            for (int l = 0; l < 4; l++) {
                double x = w[r + l];
                sa[l] += a[r + l] * x;
                sb[l] += b[r + l] * x;
                sc[l] += c[r + l] * x;
                sd[l] += d[r + l] * x;
            }
        for (Py_ssize_t r = n4; r < n; r++) {
            sa[0] += a[r] * w[r]; sb[0] += b[r] * w[r]; sc[0] += c[r] * w[r]; sd[0] += d[r] * w[r];
        }
        out[i0 * stride] = (sa[0] + sa[1]) + (sa[2] + sa[3]);
        out[(i0 + 1) * stride] = (sb[0] + sb[1]) + (sb[2] + sb[3]);
        out[(i0 + 2) * stride] = (sc[0] + sc[1]) + (sc[2] + sc[3]);
        out[(i0 + 3) * stride] = (sd[0] + sd[1]) + (sd[2] + sd[3]);
    }
    for (; i < m; i++) {
        Py_ssize_t i0 = reverse ? m - i - 1 : i;
        out[i0 * stride] = dot(V + i0 * ld, w, n);
    }
}

/* w -= sum_i c[i] V_i, as m successive updates w = w - c[i] V_i (four rows per pass over w) */
static inline void updates(double *restrict w, const double *restrict V, Py_ssize_t ld, Py_ssize_t m,
                           const double *restrict c, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 4 <= m; i += 4) {
        const double *a = V + i * ld, *b = a + ld, *e = b + ld, *d = e + ld;
        double ca = c[i], cb = c[i + 1], ce = c[i + 2], cd = c[i + 3];
        for (Py_ssize_t r = 0; r < n; r++) w[r] = (((w[r] - ca * a[r]) - cb * b[r]) - ce * e[r]) - cd * d[r];
    }
    for (; i < m; i++) {
        const double *a = V + i * ld;
        double ca = c[i];
        for (Py_ssize_t r = 0; r < n; r++) w[r] = w[r] - ca * a[r];
    }
}

/* out[i] = sum over blocks b (in order) of part[b * m + i] */
static void reduce_blocks(const double *part, Py_ssize_t nb, Py_ssize_t m, double *out)
{
    for (Py_ssize_t i = 0; i < m; i++) out[i] = 0.0;
    for (Py_ssize_t b = 0; b < nb; b++)
        for (Py_ssize_t i = 0; i < m; i++) out[i] += part[b * m + i];
}

/* ---- Gram-Schmidt ----------------------------------------------------------------------------- */

#define BLOCK_ROWS(b, n, r0, len) Py_ssize_t r0 = (b) * BLOCK, len = (r0 + BLOCK <= (n)) ? BLOCK : (n) - r0

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* the blocks [b0, b1) of this thread in a static partition of nb blocks */
static void thread_blocks(Py_ssize_t nb, Py_ssize_t *b0, Py_ssize_t *b1)
{
#ifdef _OPENMP
    Py_ssize_t t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    Py_ssize_t t = 0, nt = 1;
#endif
    *b0 = nb * t / nt;
    *b1 = nb * (t + 1) / nt;
}

/* pass 1 on one block: part = V_c^T w_c */
HOT static void block_project(const double *V, Py_ssize_t ld, Py_ssize_t m, const double *w, Py_ssize_t len,
                              double *part)
{
    dots(V, ld, m, w, len, part, 1, 0);
}

/* pass 2 on one block, by sub-blocks of SUB rows while they are in cache: w_s -= V_s h, then
 * part += V_s^T w_s (the rows read last first) */
HOT static void block_update_project(const double *V, Py_ssize_t ld, Py_ssize_t m, double *w, Py_ssize_t len,
                                     const double *h, double *part, double *tmp)
{
    for (Py_ssize_t s0 = 0; s0 < len; s0 += SUB) {
        Py_ssize_t sl = len - s0 < SUB ? len - s0 : SUB;
        updates(w + s0, V + s0, ld, m, h, sl);
        dots(V + s0, ld, m, w + s0, sl, s0 ? tmp : part, 1, 1);
        if (s0)
            for (Py_ssize_t i = 0; i < m; i++) part[i] += tmp[i];
    }
}

/* pass 3 on one block: w_c -= V_c h; returns ||w_c||^2 */
HOT static double block_update_norm(const double *V, Py_ssize_t ld, Py_ssize_t m, double *w, Py_ssize_t len,
                                    const double *h)
{
    updates(w, V, ld, m, h, len);
    return dot(w, w, len);
}

/* out_c = sum_i y[i] V_i,c as out_c = 0 - (-y[i]) V_i,c, ... (negation is exact) */
HOT static void block_combine(const double *V, Py_ssize_t ld, Py_ssize_t k, const double *negy, double *out,
                              Py_ssize_t len)
{
    for (Py_ssize_t r = 0; r < len; r++) out[r] = 0.0;
    updates(out, V, ld, k, negy, len);
}

/* w -= V[:m] h1 with h1 = V[:m]^T w; w -= V[:m] h2 with h2 = V[:m]^T w; h = h1 + h2; return ||w||^2 */
/* part: nb * m + nt * m doubles of scratch; h2: m; nt threads */
static double cgs2_core(const double *V, Py_ssize_t ld, Py_ssize_t m, double *w, Py_ssize_t n, double *h,
                        double *part, double *h2, int nt)
{
    Py_ssize_t nb = (n + BLOCK - 1) / BLOCK;
    double hn2 = 0.0;
    /* pass 1: four rows of V at a time along all the blocks of a thread (long streams for the prefetcher),
     * the sums still made per block */
    #pragma omp parallel num_threads(nt)
    {
        Py_ssize_t b0, b1;
        thread_blocks(nb, &b0, &b1);
        for (Py_ssize_t i = 0; i < m; i += 4) {
            Py_ssize_t g = m - i < 4 ? m - i : 4;
            for (Py_ssize_t b = b0; b < b1; b++) {
                BLOCK_ROWS(b, n, r0, len);
                block_project(V + i * ld + r0, ld, g, w + r0, len, part + b * m + i);
            }
        }
    }
    reduce_blocks(part, nb, m, h);
    #pragma omp parallel num_threads(nt)
    {
        Py_ssize_t b0, b1;
        double *tmp = part + nb * m + (Py_ssize_t)thread_id() * m;
        thread_blocks(nb, &b0, &b1);
        for (Py_ssize_t b = b0; b < b1; b++) {
            BLOCK_ROWS(b, n, r0, len);
            block_update_project(V + r0, ld, m, w + r0, len, h, part + b * m, tmp);
        }
    }
    reduce_blocks(part, nb, m, h2);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (Py_ssize_t b = 0; b < nb; b++) {
        BLOCK_ROWS(b, n, r0, len);
        part[b] = block_update_norm(V + r0, ld, m, w + r0, len, h2);
    }
    for (Py_ssize_t b = 0; b < nb; b++) hn2 += part[b];
    for (Py_ssize_t i = 0; i < m; i++) h[i] += h2[i];
    return hn2;
}

static PyObject *py_cgs2(PyObject *self, PyObject *args)
{
    PyObject *o[3];
    Py_ssize_t j;
    Py_buffer b[3];                                       /* V, w, h */
    if (!PyArg_ParseTuple(args, "OnOO", &o[0], &j, &o[1], &o[2])) return NULL;
    if (get_all(o, b, "dDD", (const char *[]){"V", "w", "h"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[1]), m = j + 1, nb = (n + BLOCK - 1) / BLOCK;
    int nt = threads_for(n);
    PyObject *res = NULL;
    if (require(b[0].ndim == 2 && b[0].shape[1] == n && j >= 0 && m <= b[0].shape[0] && NELEM(b[2]) >= m,
                "cgs2: V must be (rows > j, n), w (n,), h (>= j + 1,)")) {
        double *part = malloc(sizeof(double) * (size_t)(nb * m + (Py_ssize_t)nt * m + m + 1)), hn2;
        if (!part) PyErr_NoMemory();
        else {
            Py_BEGIN_ALLOW_THREADS
            hn2 = cgs2_core(b[0].buf, n, m, b[1].buf, n, b[2].buf, part, part + nb * m + (Py_ssize_t)nt * m, nt);
            Py_END_ALLOW_THREADS
            free(part);
            res = PyFloat_FromDouble(hn2);
        }
    }
    release_all(b, 3);
    return res;
}

/* ---- DCGS2: classical Gram-Schmidt twice, the second pass delayed by one step ---------------- */

/* on one block, rows i..i+g-1 of Q (g <= 4): ps[k] = Q_{i+k}.v, pt[k] = Q_{i+k}.z (dot()'s lanes) */
HOT static void block_project2(const double *Q, Py_ssize_t ld, Py_ssize_t g, const double *v, const double *z,
                               Py_ssize_t len, double *ps, double *pt)
{
    if (g < 4) {
        for (Py_ssize_t k = 0; k < g; k++) {
            ps[k] = dot(Q + k * ld, v, len);
            pt[k] = dot(Q + k * ld, z, len);
        }
        return;
    }
    const double *a = Q, *b = a + ld, *c = b + ld, *d = c + ld;
    double sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0}, sc[4] = {0, 0, 0, 0}, sd[4] = {0, 0, 0, 0};
    double ta[4] = {0, 0, 0, 0}, tb[4] = {0, 0, 0, 0}, tc[4] = {0, 0, 0, 0}, td[4] = {0, 0, 0, 0};
    Py_ssize_t n4 = len - len % 4;
    for (Py_ssize_t r = 0; r < n4; r += 4)
        for (int l = 0; l < 4; l++) {
            double x = v[r + l], y = z[r + l];
            sa[l] += a[r + l] * x; sb[l] += b[r + l] * x; sc[l] += c[r + l] * x; sd[l] += d[r + l] * x;
            ta[l] += a[r + l] * y; tb[l] += b[r + l] * y; tc[l] += c[r + l] * y; td[l] += d[r + l] * y;
        }
    for (Py_ssize_t r = n4; r < len; r++) {
        double x = v[r], y = z[r];
        sa[0] += a[r] * x; sb[0] += b[r] * x; sc[0] += c[r] * x; sd[0] += d[r] * x;
        ta[0] += a[r] * y; tb[0] += b[r] * y; tc[0] += c[r] * y; td[0] += d[r] * y;
    }
    ps[0] = (sa[0] + sa[1]) + (sa[2] + sa[3]); ps[1] = (sb[0] + sb[1]) + (sb[2] + sb[3]);
    ps[2] = (sc[0] + sc[1]) + (sc[2] + sc[3]); ps[3] = (sd[0] + sd[1]) + (sd[2] + sd[3]);
    pt[0] = (ta[0] + ta[1]) + (ta[2] + ta[3]); pt[1] = (tb[0] + tb[1]) + (tb[2] + tb[3]);
    pt[2] = (tc[0] + tc[1]) + (tc[2] + tc[3]); pt[3] = (td[0] + td[1]) + (td[2] + td[3]);
}

/* on one block: v.v and v.z */
HOT static void block_vv_vz(const double *v, const double *z, Py_ssize_t len, double *out)
{
    out[0] = dot(v, v, len);
    out[1] = dot(v, z, len);
}

/* on one block: v_c = (v_c - Q_c s) / alpha; z_c = ((z_c - Q_c t) - tau v_c) / alpha; returns ||z_c||^2 */
HOT static double block_update2(const double *Q, Py_ssize_t ld, Py_ssize_t m, double *v, double *z, Py_ssize_t len,
                                const double *s, const double *t, double alpha, double tau)
{
    Py_ssize_t i = 0;
    for (; i + 4 <= m; i += 4) {
        const double *a = Q + i * ld, *b = a + ld, *e = b + ld, *d = e + ld;
        double sa = s[i], sb = s[i + 1], se = s[i + 2], sd = s[i + 3];
        double ta = t[i], tb = t[i + 1], te = t[i + 2], td = t[i + 3];
        for (Py_ssize_t r = 0; r < len; r++) {
            double qa = a[r], qb = b[r], qe = e[r], qd = d[r];
            v[r] = (((v[r] - sa * qa) - sb * qb) - se * qe) - sd * qd;
            z[r] = (((z[r] - ta * qa) - tb * qb) - te * qe) - td * qd;
        }
    }
    for (; i < m; i++) {
        const double *a = Q + i * ld;
        double sa = s[i], ta = t[i];
        for (Py_ssize_t r = 0; r < len; r++) {
            v[r] = v[r] - sa * a[r];
            z[r] = z[r] - ta * a[r];
        }
    }
    for (Py_ssize_t r = 0; r < len; r++) {
        v[r] = v[r] / alpha;
        z[r] = (z[r] - tau * v[r]) / alpha;
    }
    return dot(z, z, len);
}

static PyObject *py_project2(PyObject *self, PyObject *args)
{
    PyObject *o[4];
    Py_ssize_t m;
    Py_buffer b[4];                                       /* V, v, z, out */
    if (!PyArg_ParseTuple(args, "OnOOO", &o[0], &m, &o[1], &o[2], &o[3])) return NULL;
    if (get_all(o, b, "dddD", (const char *[]){"V", "v", "z", "out"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[1]), nb = (n + BLOCK - 1) / BLOCK, w = 2 * m + 2;
    int nt = threads_for(n);
    (void)nt;                                             /* unused without OpenMP */
    PyObject *res = NULL;
    if (require(b[0].ndim == 2 && b[0].shape[1] == n && NELEM(b[2]) == n && m >= 0 && m <= b[0].shape[0]
                && NELEM(b[3]) >= w, "project2: V (rows >= m, n), v and z (n,), out (>= 2 m + 2,)")) {
        const double *q = b[0].buf, *pv = b[1].buf, *pz = b[2].buf;
        double *part = malloc(sizeof(double) * (size_t)(nb * w + 1));
        if (!part) PyErr_NoMemory();
        else {
            Py_BEGIN_ALLOW_THREADS
            /* four rows of Q at a time along all the blocks of a thread (long streams), sums per block */
            #pragma omp parallel num_threads(nt)
            {
                Py_ssize_t b0, b1;
                thread_blocks(nb, &b0, &b1);
                for (Py_ssize_t i = 0; i < m; i += 4) {
                    Py_ssize_t g = m - i < 4 ? m - i : 4;
                    for (Py_ssize_t c = b0; c < b1; c++) {
                        BLOCK_ROWS(c, n, r0, len);
                        block_project2(q + i * n + r0, n, g, pv + r0, pz + r0, len, part + c * w + i,
                                       part + c * w + m + i);
                    }
                }
                for (Py_ssize_t c = b0; c < b1; c++) {
                    BLOCK_ROWS(c, n, r0, len);
                    block_vv_vz(pv + r0, pz + r0, len, part + c * w + 2 * m);
                }
            }
            reduce_blocks(part, nb, w, b[3].buf);
            Py_END_ALLOW_THREADS
            free(part);
            res = Py_None; Py_INCREF(res);
        }
    }
    release_all(b, 4);
    return res;
}

static PyObject *py_update2(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    Py_ssize_t m;
    double alpha, tau;
    Py_buffer b[5];                                       /* V, v, z, s, t */
    if (!PyArg_ParseTuple(args, "OnOOOOdd", &o[0], &m, &o[1], &o[2], &o[3], &o[4], &alpha, &tau)) return NULL;
    if (get_all(o, b, "dDDdd", (const char *[]){"V", "v", "z", "s", "t"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[1]), nb = (n + BLOCK - 1) / BLOCK;
    int nt = threads_for(n);
    PyObject *res = NULL;
    if (require(b[0].ndim == 2 && b[0].shape[1] == n && NELEM(b[2]) == n && m >= 0 && m <= b[0].shape[0]
                && NELEM(b[3]) >= m && NELEM(b[4]) >= m,
                "update2: V (rows >= m, n), v and z (n,), s and t (>= m,)")) {
        double *part = malloc(sizeof(double) * (size_t)(nb + 1)), nz = 0.0;
        if (!part) PyErr_NoMemory();
        else {
            const double *q = b[0].buf, *ps = b[3].buf, *pt = b[4].buf;
            double *pv = b[1].buf, *pz = b[2].buf;
            (void)nt;
            Py_BEGIN_ALLOW_THREADS
            #pragma omp parallel for schedule(static) num_threads(nt)
            for (Py_ssize_t c = 0; c < nb; c++) {
                BLOCK_ROWS(c, n, r0, len);
                part[c] = block_update2(q + r0, n, m, pv + r0, pz + r0, len, ps, pt, alpha, tau);
            }
            for (Py_ssize_t c = 0; c < nb; c++) nz += part[c];
            Py_END_ALLOW_THREADS
            free(part);
            res = PyFloat_FromDouble(nz);
        }
    }
    release_all(b, 5);
    return res;
}

/* ---- out = y @ V[:k] -------------------------------------------------------------------------- */

static PyObject *py_combine(PyObject *self, PyObject *args)
{
    PyObject *o[3];
    Py_ssize_t k;
    Py_buffer b[3];                                       /* V, y, out */
    if (!PyArg_ParseTuple(args, "OnOO", &o[0], &k, &o[1], &o[2])) return NULL;
    if (get_all(o, b, "ddD", (const char *[]){"V", "y", "out"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[2]), nb = (n + BLOCK - 1) / BLOCK;
    int nt = threads_for(n);
    PyObject *res = NULL;
    if (require(b[0].ndim == 2 && b[0].shape[1] == n && k >= 0 && k <= b[0].shape[0] && NELEM(b[1]) >= k,
                "combine: V must be (rows >= k, n), y (>= k,), out (n,)")) {
        const double *v = b[0].buf, *c = b[1].buf;
        double *out = b[2].buf, *negy = malloc(sizeof(double) * (size_t)(k + 1));
        if (!negy) PyErr_NoMemory();
        else {
            for (Py_ssize_t i = 0; i < k; i++) negy[i] = -c[i];
            (void)nt;
            Py_BEGIN_ALLOW_THREADS
            #pragma omp parallel for schedule(static) num_threads(nt)
            for (Py_ssize_t q = 0; q < nb; q++) {
                BLOCK_ROWS(q, n, r0, len);
                block_combine(v + r0, n, k, negy, out + r0, len);
            }
            Py_END_ALLOW_THREADS
            free(negy);
            res = Py_None; Py_INCREF(res);
        }
    }
    release_all(b, 3);
    return res;
}

/* ---- CSR kernels, for 32- and 64-bit indices -------------------------------------------------- */

#define CSR_KERNELS(IT, SUF)                                                                           \
static void spmv_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,                  \
                       const double *restrict val, const double *restrict x, double *restrict y)      \
{                                                                                                      \
    int nt = threads_for(n);                                                                           \
    (void)nt;                                                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nt)")                                       \
    for (Py_ssize_t i = 0; i < n; i++) {                                                               \
        double s = 0.0;                                                                                \
        for (IT k = ptr[i]; k < ptr[i + 1]; k++) s += val[k] * x[col[k]];                              \
        y[i] = s;                                                                                      \
    }                                                                                                  \
}                                                                                                      \
static void setup_##SUF(Py_ssize_t n, const IT *ptr, const IT *col, IT *dpos)                          \
{                                                                                                      \
    for (Py_ssize_t i = 0; i < n; i++) {                                                               \
        IT lo = ptr[i], hi = ptr[i + 1];                  /* the first position with col >= i */      \
        while (lo < hi) {                                                                              \
            IT mid = lo + (hi - lo) / 2;                                                               \
            if (col[mid] < (IT)i) lo = mid + 1; else hi = mid;                                         \
        }                                                                                              \
        dpos[i] = lo;                                                                                  \
    }                                                                                                  \
}                                                                                                      \
static void ssor_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,                  \
                       const double *restrict val, const IT *restrict dpos,                           \
                       const double *restrict v, double *restrict x)                                  \
{                                                                                                      \
    /* the diagonal a_ii is read where it is stored, next to the half row just read (0 if absent) */ \
    for (Py_ssize_t i = 0; i < n; i++) {                  /* x = (D - L)^{-1} v */                    \
        IT k = ptr[i], p = dpos[i];                                                                    \
        double s = 0.0, di = (p < ptr[i + 1] && col[p] == (IT)i) ? val[p] : 0.0;                       \
        for (; k < p; k++) s += val[k] * x[col[k]];                                                    \
        x[i] = di != 0.0 ? (v[i] - s) / di : 0.0;                                                      \
    }                                                                                                  \
    for (Py_ssize_t i = n - 1; i >= 0; i--) {             /* x = (D - U)^{-1} D x */                  \
        IT k = dpos[i];                                                                                \
        double s = 0.0, di = 0.0;                                                                      \
        if (k < ptr[i + 1] && col[k] == (IT)i) di = val[k++];                                          \
        for (; k < ptr[i + 1]; k++) s += val[k] * x[col[k]];                                           \
        if (di != 0.0) x[i] = (di * x[i] - s) / di;                                                    \
    }                                                                                                  \
}                                                                                                      \
/* x = SSOR(1) v and y = A x in one go (Eisenstat, SIAM J. Sci. Stat. Comput. 2, 1981): with           \
 * x1 = (D - L)^{-1} v, (D - U) x = D x1 gives A x = (D - U) x - L x = D x1 - L x: the product needs  \
 * the lower triangle only (rows with a zero diagonal take their whole row). y holds x1 until the     \
 * last pass; x is ssor_'s to the last bit. The product pass has independent rows: threaded. */       \
static void ssorap_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,                \
                         const double *restrict val, const IT *restrict dpos,                         \
                         const double *restrict v, double *restrict x, double *restrict y)            \
{                                                                                                      \
    for (Py_ssize_t i = 0; i < n; i++) {                  /* y = x1 = (D - L)^{-1} v */               \
        IT k = ptr[i], p = dpos[i];                                                                    \
        double s = 0.0, di = (p < ptr[i + 1] && col[p] == (IT)i) ? val[p] : 0.0;                       \
        for (; k < p; k++) s += val[k] * y[col[k]];                                                    \
        y[i] = di != 0.0 ? (v[i] - s) / di : 0.0;                                                      \
    }                                                                                                  \
    for (Py_ssize_t i = n - 1; i >= 0; i--) {             /* x = (D - U)^{-1} D x1 */                 \
        IT k = dpos[i];                                                                                \
        double s = 0.0, di = 0.0;                                                                      \
        if (k < ptr[i + 1] && col[k] == (IT)i) di = val[k++];                                          \
        for (; k < ptr[i + 1]; k++) s += val[k] * x[col[k]];                                           \
        x[i] = di != 0.0 ? (di * y[i] - s) / di : y[i];                                                \
    }                                                                                                  \
    int nt = threads_for(n);                                                                           \
    (void)nt;                                                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nt)")                                       \
    for (Py_ssize_t i = 0; i < n; i++) {                  /* y = D x1 - L x (A x if d_i = 0) */       \
        IT k = ptr[i], p = dpos[i], e = ptr[i + 1];                                                    \
        int has = p < e && col[p] == (IT)i && val[p] != 0.0;                                           \
        double s = has ? val[p] * y[i] : 0.0;                                                          \
        for (; k < p; k++) s += val[k] * x[col[k]];                                                    \
        if (!has)                                                                                      \
            for (k = p; k < e; k++) s += val[k] * x[col[k]];                                           \
        y[i] = s;                                                                                      \
    }                                                                                                  \
}                                                                                                      \
/* Block SSOR(1): the rows cut into nblk fixed blocks [bnd[c], bnd[c+1]); with A_B the block diagonal  \
 * part of A and A_o = A - A_B, t = tril(A_B)^{-1} v (a forward solve in each block, the other blocks' \
 * unknowns taken as 0), then x = triu(A_B)^{-1} (D t - A_o t) (a backward solve in each block, the    \
 * other blocks' unknowns taken from t). One block is SSOR(1). The blocks are independent in each     \
 * pass (a barrier between the passes), so the threads share them out and never change a result.     \
 * Row i's entries: [ptr_i, dpos_i) lower (those before column bnd[c] in other blocks), the diagonal,   \
 * then upper (those from column bnd[c+1] on in other blocks). */                                     \
static void bssor_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,                 \
                        const double *restrict val, const IT *restrict dpos, const IT *restrict bnd,  \
                        Py_ssize_t nblk, const double *restrict v, double *restrict x,               \
                        double *restrict t)                                                            \
{                                                                                                      \
    int nt = threads_for(n);                                                                           \
    (void)nt;                                                                                          \
    _Pragma("omp parallel num_threads(nt)")                                                            \
    {                                                                                                  \
        _Pragma("omp for schedule(static)")                                                            \
        for (Py_ssize_t c = 0; c < nblk; c++) {                                                        \
            IT r0 = bnd[c], r1 = bnd[c + 1];                                                           \
            for (IT i = r0; i < r1; i++) {                /* t = tril(A_B)^{-1} v */                  \
                IT k = ptr[i], p = dpos[i];                                                            \
                double s = 0.0, di = (p < ptr[i + 1] && col[p] == i) ? val[p] : 0.0;                   \
                while (k < p && col[k] < r0) k++;                                                      \
                for (; k < p; k++) s += val[k] * t[col[k]];                                            \
                t[i] = di != 0.0 ? (v[i] - s) / di : 0.0;                                              \
            }                                                                                          \
        }                                                                                              \
        _Pragma("omp for schedule(static)")                                                            \
        for (Py_ssize_t c = 0; c < nblk; c++) {                                                        \
            IT r0 = bnd[c], r1 = bnd[c + 1];                                                           \
            for (IT i = r1 - 1; i >= r0; i--) {           /* x = triu(A_B)^{-1} (D t - A_o t) */      \
                IT k = ptr[i], p = dpos[i], e = ptr[i + 1];                                            \
                double s = 0.0, di = 0.0;                                                              \
                for (; k < p && col[k] < r0; k++) s += val[k] * t[col[k]];                             \
                k = p;                                                                                 \
                if (k < e && col[k] == i) di = val[k++];                                               \
                for (; k < e && col[k] < r1; k++) s += val[k] * x[col[k]];                             \
                for (; k < e; k++) s += val[k] * t[col[k]];                                            \
                x[i] = di != 0.0 ? (di * t[i] - s) / di : t[i];                                        \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
}

CSR_KERNELS(int32_t, i32)
CSR_KERNELS(int64_t, i64)

/* b[0..2] = indptr, indices, data of a CSR matrix: one integer type, as many indices as values */
static int csr_ok(const Py_buffer *b)
{
    return require(b[0].itemsize == b[1].itemsize && NELEM(b[0]) >= 1 && NELEM(b[1]) >= NELEM(b[2]),
                   "indptr and indices must have one integer type");
}

static PyObject *py_spmv(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    Py_buffer b[5];                                       /* indptr, indices, data, x, out */
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    if (get_all(o, b, "iiddD", (const char *[]){"indptr", "indices", "data", "x", "out"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1;
    PyObject *res = NULL;
    if (csr_ok(b) && require(NELEM(b[4]) == n, "spmv: out must have one entry a row")) {
        Py_BEGIN_ALLOW_THREADS
        if (b[0].itemsize == 4) spmv_i32(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf);
        else spmv_i64(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf);
        Py_END_ALLOW_THREADS
        res = Py_None; Py_INCREF(res);
    }
    release_all(b, 5);
    return res;
}

static PyObject *py_ssor_setup(PyObject *self, PyObject *args)
{
    PyObject *o[3];
    Py_buffer b[3];                                       /* indptr, indices, dpos */
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2])) return NULL;
    if (get_all(o, b, "iiI", (const char *[]){"indptr", "indices", "dpos"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1;
    PyObject *res = NULL;
    if (require(b[0].itemsize == b[1].itemsize && b[2].itemsize == b[0].itemsize && n >= 0 && NELEM(b[2]) == n,
                "ssor_setup: indptr, indices and dpos of one integer type, dpos one entry a row")) {
        Py_BEGIN_ALLOW_THREADS
        if (b[0].itemsize == 4) setup_i32(n, b[0].buf, b[1].buf, b[2].buf);
        else setup_i64(n, b[0].buf, b[1].buf, b[2].buf);
        Py_END_ALLOW_THREADS
        res = Py_None; Py_INCREF(res);
    }
    release_all(b, 3);
    return res;
}

static PyObject *py_ssor(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    Py_buffer b[6];                                       /* indptr, indices, data, dpos, v, out */
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5])) return NULL;
    if (get_all(o, b, "iiiddD", (const char *[]){"indptr", "indices", "dpos", "data", "v", "out"}) < 0)
        return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1;
    PyObject *res = NULL;
    if (require(b[0].itemsize == b[1].itemsize && b[2].itemsize == b[0].itemsize && n >= 0
                && NELEM(b[1]) >= NELEM(b[3]) && NELEM(b[2]) == n && NELEM(b[4]) == n && NELEM(b[5]) == n
                && b[4].buf != b[5].buf,
                "ssor: indptr, indices, dpos of one integer type; dpos, v and out (not v) one entry a row")) {
        Py_BEGIN_ALLOW_THREADS
        if (b[0].itemsize == 4) ssor_i32(n, b[0].buf, b[1].buf, b[3].buf, b[2].buf, b[4].buf, b[5].buf);
        else ssor_i64(n, b[0].buf, b[1].buf, b[3].buf, b[2].buf, b[4].buf, b[5].buf);
        Py_END_ALLOW_THREADS
        res = Py_None; Py_INCREF(res);
    }
    release_all(b, 6);
    return res;
}

static PyObject *py_ssor_ap(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    Py_buffer b[7];                                       /* indptr, indices, dpos, data, v, x, y */
    if (!PyArg_ParseTuple(args, "OOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6])) return NULL;
    if (get_all(o, b, "iiiddDD", (const char *[]){"indptr", "indices", "dpos", "data", "v", "x", "y"}) < 0)
        return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1;
    PyObject *res = NULL;
    if (require(b[0].itemsize == b[1].itemsize && b[2].itemsize == b[0].itemsize && n >= 0
                && NELEM(b[1]) >= NELEM(b[3]) && NELEM(b[2]) == n && NELEM(b[4]) == n && NELEM(b[5]) == n
                && NELEM(b[6]) == n && b[4].buf != b[5].buf && b[4].buf != b[6].buf && b[5].buf != b[6].buf,
                "ssor_ap: indptr, indices, dpos of one integer type; dpos, v, x, y (three different arrays) "
                "one entry a row")) {
        Py_BEGIN_ALLOW_THREADS
        if (b[0].itemsize == 4) ssorap_i32(n, b[0].buf, b[1].buf, b[3].buf, b[2].buf, b[4].buf, b[5].buf, b[6].buf);
        else ssorap_i64(n, b[0].buf, b[1].buf, b[3].buf, b[2].buf, b[4].buf, b[5].buf, b[6].buf);
        Py_END_ALLOW_THREADS
        res = Py_None; Py_INCREF(res);
    }
    release_all(b, 7);
    return res;
}

static PyObject *py_bssor(PyObject *self, PyObject *args)
{
    PyObject *o[8];
    Py_buffer b[8];                                       /* indptr, indices, dpos, bounds, data, v, out, scratch */
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7])) return NULL;
    if (get_all(o, b, "iiiiddDD", (const char *[]){"indptr", "indices", "dpos", "bounds", "data", "v", "out",
                                                   "scratch"}) < 0)
        return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1, nblk = NELEM(b[3]) - 1;
    PyObject *res = NULL;
    int ok = require(b[0].itemsize == b[1].itemsize && b[2].itemsize == b[0].itemsize
                     && b[3].itemsize == b[0].itemsize && n >= 0 && nblk >= 1
                     && NELEM(b[1]) >= NELEM(b[4]) && NELEM(b[2]) == n && NELEM(b[5]) == n && NELEM(b[6]) == n
                     && NELEM(b[7]) == n && b[5].buf != b[6].buf && b[5].buf != b[7].buf && b[6].buf != b[7].buf,
                     "bssor: indptr, indices, dpos, bounds of one integer type; dpos, v, out, scratch (three "
                     "different arrays) one entry a row; at least one block");
    if (ok) {                                             /* bounds: 0 = b_0 <= b_1 <= ... <= b_nblk = n */
        int mono = 1;
        for (Py_ssize_t c = 0; c < nblk && mono; c++)
            mono = b[0].itemsize == 4 ? ((int32_t *)b[3].buf)[c] <= ((int32_t *)b[3].buf)[c + 1]
                                      : ((int64_t *)b[3].buf)[c] <= ((int64_t *)b[3].buf)[c + 1];
        int64_t lo = b[0].itemsize == 4 ? ((int32_t *)b[3].buf)[0] : ((int64_t *)b[3].buf)[0];
        int64_t hi = b[0].itemsize == 4 ? ((int32_t *)b[3].buf)[nblk] : ((int64_t *)b[3].buf)[nblk];
        ok = require(mono && lo == 0 && hi == n, "bssor: bounds must rise from 0 to the number of rows");
    }
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        if (b[0].itemsize == 4)
            bssor_i32(n, b[0].buf, b[1].buf, b[4].buf, b[2].buf, b[3].buf, nblk, b[5].buf, b[6].buf, b[7].buf);
        else
            bssor_i64(n, b[0].buf, b[1].buf, b[4].buf, b[2].buf, b[3].buf, nblk, b[5].buf, b[6].buf, b[7].buf);
        Py_END_ALLOW_THREADS
        res = Py_None; Py_INCREF(res);
    }
    release_all(b, 8);
    return res;
}

#include "_kernels_bicg.h"            /* BiCGStab's vector steps (bicg_dir, bicg_half, dot2, bicg_update) */

/* ---- threads ---------------------------------------------------------------------------------- */

static PyObject *py_set_threads(PyObject *self, PyObject *args)
{
    int t;
    if (!PyArg_ParseTuple(args, "i", &t)) return NULL;
    if (t < 1) { PyErr_SetString(PyExc_ValueError, "threads must be >= 1"); return NULL; }
#ifdef _OPENMP
    nthreads = t;
#endif
    return PyLong_FromLong(nthreads);
}

static PyObject *py_get_threads(PyObject *self, PyObject *noargs) { return PyLong_FromLong(nthreads); }

#include "_kernels_signal.h"          /* Ctrl-C of the command line (arm_sigint, sigint_armed) */

#include "_kernels_graph.h"           /* the structure kernels of the set-up (select, product, reach, walk, ...) */
#include "_kernels_tr.h"              /* the transposed system from Q's rows (tr) */
#include "_kernels_gth.h"             /* GTH elimination of a dense stationary vector (gth) */
#include "_kernels_ilu.h"             /* ILU(0) of the pinned system on Q's pattern (ilu0) */
#include "_kernels_gs.h"              /* Gauss-Seidel / SOR sweeps (gs) */

static PyMethodDef methods[] = {
    {"cgs2", py_cgs2, METH_VARARGS, "cgs2(V, j, w, h) -> ||w||^2: w orthogonalised against V[:j+1] in place, "
                                    "h[:j+1] its coefficients (classical Gram-Schmidt twice, 3 reads of V)"},
    {"project2", py_project2, METH_VARARGS,
     "project2(V, m, v, z, out): out = [V[:m] v, V[:m] z, v.v, v.z] (one read of V[:m])"},
    {"update2", py_update2, METH_VARARGS,
     "update2(V, m, v, z, s, t, alpha, tau) -> ||z||^2 after v = (v - V[:m]^T s) / alpha, "
     "z = ((z - V[:m]^T t) - tau v) / alpha, in place (one read of V[:m])"},
    {"combine", py_combine, METH_VARARGS, "combine(V, k, y, out): out = y[:k] @ V[:k]"},
    {"spmv", py_spmv, METH_VARARGS, "spmv(indptr, indices, data, x, out): out = A x (CSR, threaded)"},
    {"ssor_setup", py_ssor_setup, METH_VARARGS,
     "ssor_setup(indptr, indices, dpos): the first position of each sorted row with a column >= the row"},
    {"ssor", py_ssor, METH_VARARGS,
     "ssor(indptr, indices, dpos, data, v, out): out = (D - U)^{-1} D (D - L)^{-1} v"},
    {"ssor_ap", py_ssor_ap, METH_VARARGS,
     "ssor_ap(indptr, indices, dpos, data, v, x, y): x = ssor(v) and y = A x, the product from the lower "
     "triangle only (A x = D x1 - L x, x1 = (D - L)^{-1} v)"},
    {"bssor", py_bssor, METH_VARARGS,
     "bssor(indptr, indices, dpos, bounds, data, v, out, scratch): block SSOR(1) on the row blocks "
     "[bounds[c], bounds[c+1]): scratch = tril(A_B)^{-1} v, out = triu(A_B)^{-1} (D - A_o) scratch "
     "(A_B the block diagonal part, A_o the rest; the blocks in parallel)"},
    {"bicg_dir", py_bicg_dir, METH_VARARGS, "bicg_dir(p, r, v, beta, omega): p = r + beta (p - omega v)"},
    {"bicg_half", py_bicg_half, METH_VARARGS,
     "bicg_half(s, r, v, alpha, x, ph) -> s.s after s = r - alpha v, x += alpha ph"},
    {"dot2", py_dot2, METH_VARARGS, "dot2(a, u, w) -> (a.u, a.w) in one pass"},
    {"bicg_update", py_bicg_update, METH_VARARGS,
     "bicg_update(x, r, ph, sh, s, t, rhat, b, alpha, omega, out): x += alpha ph + omega sh, r = s - omega t; "
     "out[:5] = (r.r, rhat.r, max r/b and max -r/b over b > 0 (at least 0), max |r| over b <= 0) (b None: 0)"},
    {"set_threads", py_set_threads, METH_VARARGS, "set_threads(t) -> the thread count in use (1 without OpenMP)"},
    {"get_threads", py_get_threads, METH_NOARGS, "get_threads() -> the thread count"},
    {"select", py_select, METH_VARARGS,
     "select(indptr, indices, data, first, members, diag, pos, out_indptr, out_indices, out_data, negate): "
     "count (out_indices None: out_indptr filled, returns the entries or -1 for a kept row without one "
     "diagonal entry) or fill the kept entries (see _kernels_graph.h)"},
    {"colcount", py_colcount, METH_VARARGS, "colcount(indptr, indices, data, first, out): rates in each column"},
    {"product", py_product, METH_VARARGS,
     "product(indptr, indices, data, first, offdiag, transpose, x, out): out = A x or A^T x (A's rates alone "
     "with offdiag)"},
    {"reach", py_reach, METH_VARARGS,
     "reach(indptr, indices, data_or_None, mark, within_or_None) -> states marked: breadth-first from mark"},
    {"lowcols", py_lowcols, METH_VARARGS,
     "lowcols(indptr, indices, data, low, transpose=False): low = min(low, first non-zero column of each row "
     "(transpose: first non-zero row of each column))"},
    {"scc", py_scc, METH_VARARGS,
     "scc(indptr, indices, data_or_None, label, closed) -> components: strongly connected ones, "
     "the closed ones marked"},
    {"walk", py_walk, METH_VARARGS,
     "walk(indptr, indices, data, first, q, s, u, path) -> jumps made: the jump chain from row s"},
#ifndef _WIN32
    {"arm_sigint", py_arm_sigint, METH_VARARGS,
     "arm_sigint(message: bytes): SIGINT writes message to fd 2 and ends the process with _exit(130)"},
    {"sigint_armed", py_sigint_armed, METH_NOARGS,
     "sigint_armed() -> whether arm_sigint's handler is SIGINT's"},
#endif
    {"gth", py_gth, METH_VARARGS, "gth(A, x) -> the step of a zero pivot or -1 (A, x written: see _kernels_gth.h)"},
    {"tr", py_tr, METH_VARARGS, "tr(mode, indptr, indices, dpos, data, keep, fill, v, x, y): SSOR(1), product, "
     "row sums of masked(-Q)^T from Q's rows (see _kernels_tr.h)"},
    ILU_METHODS
    {"absmax", py_absmax, METH_VARARGS, "absmax(indptr, data) -> max over rows of sum |a_ij| (numpy's reduceat sums)"},
    GS_METHODS
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_kernels", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kernels(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
#ifdef _OPENMP
    PyModule_AddIntConstant(m, "OPENMP", 1);
#else
    PyModule_AddIntConstant(m, "OPENMP", 0);
#endif
    PyModule_AddIntConstant(m, "BLOCK", BLOCK);
    return m;
}
