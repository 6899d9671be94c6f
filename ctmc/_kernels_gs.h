/* Gauss-Seidel / SOR sweeps on A x = b, included by _kernels.c (its helpers get_all, require, release_all,
 * NELEM, csr_ok are in scope).
 *
 * One sweep over the rows in order (forward) or in reverse (backward), in place:
 *     x_i <- (1 - omega) x_i + omega (b_i - sum_{j != i} a_ij x_j) / a_ii,
 * x_j the current values (new for the rows already swept); a row without a stored non-zero diagonal
 * keeps its x_i. Each row is read in stored order with the diagonal skipped where it is met, and the
 * arithmetic is pyamg's gauss_seidel / sor_gauss_seidel (amg_core/relaxation.h) written out the same
 * way, so a sweep gives pyamg's numbers to the bit (the fallback of ctmc._relax.sweep, and the kernel
 * the stationary iterations and the tail polish ran on before). A sweep is sequential by nature: one
 * thread; the polish's products, the other half of its work, run on the threads (spmv).
 * Unlike pyamg's binding it releases the GIL, checks the sizes and takes 32- or 64-bit indices.
 * x and b may be longer than the rows (the leading rows of a larger matrix are swept, the other
 * entries of x read where the rows' columns reach them). */

/* One row's update, the body of both sweeps below */
#define GS_ROW(IT, SUF)                                                                                \
static inline void gs_row_##SUF(Py_ssize_t i, const IT *restrict ptr, const IT *restrict col,          \
                                const double *restrict val, double *restrict x, double bi,             \
                                double omega)                                                          \
{                                                                                                      \
    double s = 0.0, d = 0.0;                                                                           \
    for (IT k = ptr[i]; k < ptr[i + 1]; k++) {                                                         \
        if (col[k] == (IT)i) d = val[k];                                                               \
        else s += val[k] * x[col[k]];                                                                  \
    }                                                                                                  \
    if (d != 0.0) {                                                                                    \
        if (omega == 1.0) x[i] = (bi - s) / d;                                                         \
        else x[i] = (1.0 - omega) * x[i] + omega * ((bi - s) / d);                                     \
    }                                                                                                  \
}

GS_ROW(int32_t, gi32)
GS_ROW(int64_t, gi64)

#define GS_KERNELS(IT, SUF)                                                                            \
static void gs_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,                     \
                     const double *restrict val, double *restrict x, const double *restrict b,         \
                     double omega, int backward)                                                       \
{                                                                                                      \
    Py_ssize_t i0 = backward ? n - 1 : 0, i1 = backward ? -1 : n, step = backward ? -1 : 1;            \
    for (Py_ssize_t i = i0; i != i1; i += step) gs_row_##SUF(i, ptr, col, val, x, b[i], omega);        \
}

GS_KERNELS(int32_t, gi32)
GS_KERNELS(int64_t, gi64)

/* The same sweep over the rows listed in `rows` (m of them, in that order or its reverse) of the n-row
 * matrix, the others left as they are: pyamg's gauss_seidel_indexed (omega = 1) written out, so a sweep
 * in another order needs no permuted copy of the matrix, only the order. With `listed`, b has one entry
 * a listed row (b[t] for row rows[t]: no vector of the n rows); else b[rows[t]]. spmv_rows: the product
 * over the listed rows, out[t] = sum_k a_{rows[t] k} x_k, each row in stored order (spmv's numbers). */
#define GS_ROWS_KERNELS(IT, RT, ISUF, SUF)                                                             \
static void gsr_##SUF(Py_ssize_t m, const RT *restrict rows, const IT *restrict ptr,                   \
                      const IT *restrict col, const double *restrict val, double *restrict x,          \
                      const double *restrict b, double omega, int backward, int listed)               \
{                                                                                                      \
    Py_ssize_t t0 = backward ? m - 1 : 0, t1 = backward ? -1 : m, step = backward ? -1 : 1;            \
    for (Py_ssize_t t = t0; t != t1; t += step) {                                                      \
        Py_ssize_t i = (Py_ssize_t)rows[t];                                                            \
        gs_row_##ISUF(i, ptr, col, val, x, listed ? b[t] : b[i], omega);                               \
    }                                                                                                  \
}                                                                                                      \
static void spr_##SUF(Py_ssize_t m, const RT *restrict rows, const IT *restrict ptr,                  \
                      const IT *restrict col, const double *restrict val, const double *restrict x,   \
                      double *restrict out)                                                            \
{                                                                                                      \
    int nt = threads_for(m);                                                                           \
    (void)nt;                                                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nt)")                                       \
    for (Py_ssize_t t = 0; t < m; t++) {                                                               \
        Py_ssize_t i = (Py_ssize_t)rows[t];                                                            \
        double s = 0.0;                                                                                \
        for (IT k = ptr[i]; k < ptr[i + 1]; k++) s += val[k] * x[col[k]];                              \
        out[t] = s;                                                                                    \
    }                                                                                                  \
}

GS_ROWS_KERNELS(int32_t, int64_t, gi32, gi32)
GS_ROWS_KERNELS(int64_t, int64_t, gi64, gi64)
GS_ROWS_KERNELS(int32_t, int32_t, gi32, gi32r32)          /* rows of 32 bits: half the order's bytes */
GS_ROWS_KERNELS(int64_t, int32_t, gi64, gi64r32)

/* A Gauss-Seidel sweep on the transposed system A^T x = b from A's own rows (no A^T made): the sum of
 * column j's terms, sum_{i != j} a_ij x_i, is carried in two vectors filled by the rows as they are
 * swept (scattered, not gathered): `read` holds the terms of the rows the sweep reaches after j (filled
 * by the previous sweep in the other direction, or by gst_init; divided by `scale`, the renormalisation
 * of x since) and `fill`, all zero on entry, receives from each row i swept its terms a_ik x_i for the
 * columns k swept after i (the next sweep's `read`); read_j is zeroed once used (the next sweep's fill):
 *     x_j <- (b_j - (read_j / scale + fill_j)) / a_jj,
 * the terms of a Gauss-Seidel sweep on A^T (the new values before j, the old after), summed in another
 * order (equal to round-off). The diagonal is a_jj = -q_j (q: the exit rates, minus A's diagonal to the
 * bit); a row with q_j = 0 keeps its x_j. The rows must be sorted without duplicates (the columns
 * before the diagonal, then those after it): a sweep reads only the side it scatters. */
#define GST_KERNELS(IT, SUF)                                                                           \
static void gst_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,                   \
                      const double *restrict val, const double *restrict q, double *restrict x,       \
                      const double *restrict b, double *restrict fill, double *restrict read,         \
                      double scale, int backward)                                                      \
{                                                                                                      \
    Py_ssize_t i0 = backward ? n - 1 : 0, i1 = backward ? -1 : n, step = backward ? -1 : 1;            \
    for (Py_ssize_t i = i0; i != i1; i += step) {                                                      \
        double s = read[i] / scale + fill[i], d = -q[i];                                               \
        read[i] = 0.0;                                                                                 \
        if (d != 0.0) x[i] = ((b ? b[i] : 0.0) - s) / d;                                               \
        double xi = x[i];                                                                              \
        if (backward)                                                                                  \
            for (IT k = ptr[i]; k < ptr[i + 1] && col[k] < (IT)i; k++) fill[col[k]] += val[k] * xi;    \
        else                                                                                           \
            for (IT k = ptr[i + 1] - 1; k >= ptr[i] && col[k] > (IT)i; k--) fill[col[k]] += val[k] * xi; \
    }                                                                                                  \
}                                                                                                      \
/* out_k = sum_{i > k} a_ik x_i (backward = 0: what a backward sweep leaves for the forward one) or     \
 * sum_{i < k} (backward = 1), the rows taken in that sweep's order */                                  \
static void gst_init_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,              \
                           const double *restrict val, const double *restrict x, double *restrict out,\
                           int backward)                                                               \
{                                                                                                      \
    memset(out, 0, (size_t)n * sizeof(double));                                                       \
    Py_ssize_t i0 = backward ? 0 : n - 1, i1 = backward ? n : -1, step = backward ? 1 : -1;            \
    for (Py_ssize_t i = i0; i != i1; i += step) {                                                      \
        double xi = x[i];                                                                              \
        for (IT k = ptr[i]; k < ptr[i + 1]; k++) {                                                     \
            IT c = col[k];                                                                             \
            if (backward ? c > (IT)i : c < (IT)i) out[c] += val[k] * xi;                               \
        }                                                                                              \
    }                                                                                                  \
}

GST_KERNELS(int32_t, gi32)
GST_KERNELS(int64_t, gi64)

static PyObject *py_gs(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    Py_buffer b[5];                                       /* indptr, indices, data, x, b */
    double omega;
    int backward;
    if (!PyArg_ParseTuple(args, "OOOOOdp", &o[0], &o[1], &o[2], &o[3], &o[4], &omega, &backward)) return NULL;
    if (get_all(o, b, "iidDd", (const char *[]){"indptr", "indices", "data", "x", "b"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1;
    PyObject *res = NULL;
    if (csr_ok(b) && require(NELEM(b[3]) >= n && NELEM(b[4]) >= n && b[3].buf != b[4].buf,
                             "gs: x and b (not x) at least one entry a row")) {
        int64_t last = csr_last(&b[0], n);
        if (require(last <= NELEM(b[2]), "gs: indptr[-1] beyond the stored entries")) {
            Py_BEGIN_ALLOW_THREADS
            if (b[0].itemsize == 4) gs_gi32(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, omega, backward);
            else gs_gi64(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, omega, backward);
            Py_END_ALLOW_THREADS
            res = Py_None; Py_INCREF(res);
        }
    }
    release_all(b, 5);
    return res;
}

/* how many of the rows listed in ``rows`` (int32 or int64) fall outside 0..n-1 */
static Py_ssize_t rows_out_of_range(const Py_buffer *rows, Py_ssize_t n)
{
    Py_ssize_t bad = 0, m = NELEM(*rows);
    for (Py_ssize_t t = 0; t < m; t++) {
        int64_t r = rows->itemsize == 8 ? ((const int64_t *)rows->buf)[t]
                                        : (int64_t)((const int32_t *)rows->buf)[t];
        bad += (r < 0) | (r >= n);
    }
    return bad;
}

static PyObject *py_gs_rows(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    Py_buffer b[6];                                       /* indptr, indices, data, x, b, rows */
    double omega;
    int backward, listed = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOdp|p", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &omega, &backward,
                          &listed))
        return NULL;
    if (get_all(o, b, "iidDdi", (const char *[]){"indptr", "indices", "data", "x", "b", "rows"}) < 0)
        return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1, m = NELEM(b[5]);
    PyObject *res = NULL;
    if (csr_ok(b) && require(NELEM(b[3]) == n && NELEM(b[4]) == (listed ? m : n) && b[3].buf != b[4].buf,
                             "gs_rows: x one entry a row, b (not x) one a row or, listed, one a listed row")
            && require(b[5].itemsize == 8 || b[5].itemsize == 4, "gs_rows: rows must be int32 or int64")) {
        int64_t last = csr_last(&b[0], n);
        int wide = b[5].itemsize == 8;
        const int64_t *rows = b[5].buf;
        const int32_t *rows32 = b[5].buf;
        Py_ssize_t bad = rows_out_of_range(&b[5], n);
        if (require(last <= NELEM(b[2]), "gs_rows: indptr[-1] beyond the stored entries")
                && require(bad == 0, "gs_rows: a row number out of range")) {
            Py_BEGIN_ALLOW_THREADS
            if (b[0].itemsize == 4 && wide)
                gsr_gi32(m, rows, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, omega, backward, listed);
            else if (wide)
                gsr_gi64(m, rows, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, omega, backward, listed);
            else if (b[0].itemsize == 4)
                gsr_gi32r32(m, rows32, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, omega, backward,
                            listed);
            else
                gsr_gi64r32(m, rows32, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, omega, backward,
                            listed);
            Py_END_ALLOW_THREADS
            res = Py_None; Py_INCREF(res);
        }
    }
    release_all(b, 6);
    return res;
}

static PyObject *py_spmv_rows(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    Py_buffer b[6];                                       /* indptr, indices, data, x, rows, out */
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5])) return NULL;
    if (get_all(o, b, "iiddiD", (const char *[]){"indptr", "indices", "data", "x", "rows", "out"}) < 0)
        return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1, m = NELEM(b[4]);
    PyObject *res = NULL;
    int wide = b[4].itemsize == 8;
    const int64_t *rows = b[4].buf;
    const int32_t *rows32 = b[4].buf;
    if (csr_ok(b) && require(NELEM(b[3]) == n && NELEM(b[5]) == m, "spmv_rows: x one entry a row, out one a "
                             "listed row") && require(rows_out_of_range(&b[4], n) == 0,
                                                      "spmv_rows: a row number out of range")) {
        int64_t last = csr_last(&b[0], n);
        if (require(last <= NELEM(b[2]), "spmv_rows: indptr[-1] beyond the stored entries")) {
            Py_BEGIN_ALLOW_THREADS
            const void *p = b[0].buf, *c = b[1].buf;
            if (b[0].itemsize == 4 && wide) spr_gi32(m, rows, p, c, b[2].buf, b[3].buf, b[5].buf);
            else if (wide) spr_gi64(m, rows, p, c, b[2].buf, b[3].buf, b[5].buf);
            else if (b[0].itemsize == 4) spr_gi32r32(m, rows32, p, c, b[2].buf, b[3].buf, b[5].buf);
            else spr_gi64r32(m, rows32, p, c, b[2].buf, b[3].buf, b[5].buf);
            Py_END_ALLOW_THREADS
            res = Py_None; Py_INCREF(res);
        }
    }
    release_all(b, 6);
    return res;
}

static PyObject *py_gst(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    Py_buffer b[7];                                       /* indptr, indices, data, x, b, fill, q; read */
    PyObject *ro;
    Py_buffer rb;
    double scale;
    int backward, init;
    if (!PyArg_ParseTuple(args, "OOOOOOOOdpp", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &ro, &o[6], &scale,
                          &backward, &init))
        return NULL;
    if (get_all(o, b, "iidDdDd", (const char *[]){"indptr", "indices", "data", "x", "b", "fill", "q"}) < 0)
        return NULL;
    if (get(ro, &rb, 'd', 1, "read") < 0) { release_all(b, 7); return NULL; }
    Py_ssize_t n = NELEM(b[0]) - 1;
    PyObject *res = NULL;
    if (csr_ok(b) && require(NELEM(b[3]) == n && (NELEM(b[4]) == n || NELEM(b[4]) == 0) && NELEM(b[5]) == n
                             && NELEM(rb) == n && NELEM(b[6]) == n,
                             "gst: x, b (or empty: b = 0), fill, read and q one entry a row")
            && require(b[5].buf != b[3].buf && b[5].buf != b[4].buf && b[5].buf != rb.buf
                       && b[3].buf != b[4].buf && b[3].buf != rb.buf, "gst: x, b, fill and read distinct")) {
        int64_t last = csr_last(&b[0], n);
        if (require(last <= NELEM(b[2]), "gst: indptr[-1] beyond the stored entries")) {
            Py_BEGIN_ALLOW_THREADS
            if (init) {
                if (b[0].itemsize == 4) gst_init_gi32(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[5].buf, backward);
                else gst_init_gi64(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[5].buf, backward);
            } else if (b[0].itemsize == 4) {
                gst_gi32(n, b[0].buf, b[1].buf, b[2].buf, b[6].buf, b[3].buf, NELEM(b[4]) ? b[4].buf : NULL,
                         b[5].buf, rb.buf, scale, backward);
            } else {
                gst_gi64(n, b[0].buf, b[1].buf, b[2].buf, b[6].buf, b[3].buf, NELEM(b[4]) ? b[4].buf : NULL,
                         b[5].buf, rb.buf, scale, backward);
            }
            Py_END_ALLOW_THREADS
            res = Py_None; Py_INCREF(res);
        }
    }
    PyBuffer_Release(&rb);
    release_all(b, 7);
    return res;
}

/* ---- level sums and scaling (the polish's aggregation step, ctmc.kernels.levels.LevelAggregation) ---- */

/* lev's entry i (int32 or int64) */
#define LEV_AT(b, i) ((b).itemsize == 4 ? (int64_t)((const int32_t *)(b).buf)[i] : ((const int64_t *)(b).buf)[i])

/* level_sums(lev, x, up, down, out): out (3 nl, C order) = the sums of x, x up and x down over each level's
 * states, in state order: numpy's bincount(lev, weights=...) three times, to the bit, without a temporary */
static PyObject *py_level_sums(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    Py_buffer b[5];                                       /* lev, x, up, down, out */
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    if (get_all(o, b, "idddD", (const char *[]){"lev", "x", "up", "down", "out"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[0]), nl = NELEM(b[4]) / 3;
    PyObject *res = NULL;
    if (require(NELEM(b[1]) == n && NELEM(b[2]) == n && NELEM(b[3]) == n && NELEM(b[4]) == 3 * nl,
                "level_sums: x, up, down one entry a state; out of 3 nl entries")) {
        const double *x = b[1].buf, *up = b[2].buf, *down = b[3].buf;
        double *mass = b[4].buf, *su = mass + nl, *sd = su + nl;
        Py_ssize_t bad = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t l = 0; l < 3 * nl; l++) mass[l] = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t l = LEV_AT(b[0], i);
            if (l < 0 || l >= nl) { bad++; continue; }
            mass[l] += x[i];
            su[l] += x[i] * up[i];
            sd[l] += x[i] * down[i];
        }
        Py_END_ALLOW_THREADS
        if (require(bad == 0, "level_sums: a level out of 0..nl-1")) { res = Py_None; Py_INCREF(res); }
    }
    release_all(b, 5);
    return res;
}

/* level_scale(lev, f, x): x_i *= f[lev_i] in place (numpy's x *= f[lev] without the gathered vector) */
static PyObject *py_level_scale(PyObject *self, PyObject *args)
{
    PyObject *o[3];
    Py_buffer b[3];                                       /* lev, f, x */
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2])) return NULL;
    if (get_all(o, b, "idD", (const char *[]){"lev", "f", "x"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[0]), nl = NELEM(b[1]);
    PyObject *res = NULL;
    if (require(NELEM(b[2]) == n, "level_scale: x one entry a state")) {
        const double *f = b[1].buf;
        double *x = b[2].buf;
        Py_ssize_t bad = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t l = LEV_AT(b[0], i);
            if (l < 0 || l >= nl) bad++;
            else x[i] *= f[l];
        }
        Py_END_ALLOW_THREADS
        if (require(bad == 0, "level_scale: a level out of 0..nl-1")) { res = Py_None; Py_INCREF(res); }
    }
    release_all(b, 3);
    return res;
}

#define GS_METHODS {"level_sums", py_level_sums, METH_VARARGS, "level_sums(lev, x, up, down, out): out = " \
    "the sums of x, x up, x down over each level (3 rows of nl), in state order"}, \
    {"level_scale", py_level_scale, METH_VARARGS, "level_scale(lev, f, x): x *= f[lev] in place"}, \
    {"gst", py_gst, METH_VARARGS, "gst(indptr, indices, data, x, b, fill, read, q, scale, " \
    "backward, init): one Gauss-Seidel sweep on A^T x = b (b empty: zero) from A's rows, the column sums carried in read (/ scale; " \
    "zeroed as used) and fill (zero on entry); init: only fill = the sums a sweep in the other direction " \
    "leaves"}, \
    {"gs_rows", py_gs_rows, METH_VARARGS, "gs_rows(indptr, indices, data, x, b, rows, omega, " \
    "backward, listed=False): one Gauss-Seidel/SOR sweep over the rows listed, in that order or its " \
    "reverse, " \
    "in place (listed: b[t] for row rows[t])"}, \
    {"spmv_rows", py_spmv_rows, METH_VARARGS, "spmv_rows(indptr, indices, data, x, rows, out): out[t] = " \
    "(A x)[rows[t]], each row in stored order"}, \
    {"gs", py_gs, METH_VARARGS, "gs(indptr, indices, data, x, b, omega, backward): one " \
    "Gauss-Seidel/SOR sweep on A x = b in place, forward or backward (pyamg's arithmetic)"},
