/* The transposed system's kernels, included by _kernels.c (its helpers get_all, require, release_all,
 * NELEM are in scope).
 *
 * A = masked(-Q)^T, read from the rows of Q (CSR, sorted, diagonal stored): a_ij = -q_ji for i, j kept,
 * a_jj = fill for j not kept, 0 elsewhere (csr.masked_block of Q^T, without making Q^T). Column j of A is
 * row j of Q, so every pass below runs over Q's rows in order and scatters into the rows of A:
 *   mode 0: x = SSOR(1) v = (D - U)^{-1} D (D - L)^{-1} v, y scratch;
 *   mode 1: the same and y = A x (Eisenstat: A x = D x1 - L x, the lower part scattered in the backward
 *           pass as each x_j is made: one read of Q's lower half forward, one of Q backward);
 *   mode 2: y = A v (each y_i summed over j ascending, as a product with A's sorted rows sums it);
 *   mode 3: y_i = sum_j |a_ij| (A's row sums of magnitudes: its inf-norm is their max).
 * The forward solve sums each row's terms in the row-oriented order (j ascending), so x1 is the row
 * kernel's to the bit; the backward solve sums them j descending (round-off apart, the same operator).
 * One thread: the passes are sequential (their scatters would collide; the untransposed product below,
 * a gather, runs on the threads). */

#define TR_KERNELS(IT, SUF)                                                                            \
static void tr_##SUF(int mode, Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,          \
                     const IT *restrict dpos, const double *restrict val, const unsigned char *keep,  \
                     const IT *out, Py_ssize_t nout, double fill, double *saved,                      \
                     const double *restrict v, double *restrict x, double *restrict y)                \
{                                                                                                      \
    /* a kept column scatters into every row, the left-out ones too: a left-out row reads none of it   \
     * (its x1, x and products are set from its diagonal alone) and its y is put back at the end */   \
    if (mode >= 2) {                                      /* y = A v, or |A|'s row sums */            \
        memset(y, 0, (size_t)n * sizeof(double));                                                      \
        for (Py_ssize_t j = 0; j < n; j++) {                                                           \
            if (!keep[j]) continue;                                                                    \
            double vj = v[j];                                                                          \
            for (IT k = ptr[j]; k < ptr[j + 1]; k++)                                                   \
                y[col[k]] += mode == 2 ? -val[k] * vj : (val[k] < 0 ? -val[k] : val[k]);               \
        }                                                                                              \
        for (Py_ssize_t m = 0; m < nout; m++)                                                          \
            y[out[m]] = mode == 2 ? fill * v[out[m]] : (fill < 0 ? -fill : fill);                      \
        return;                                                                                        \
    }                                                                                                  \
    memset(x, 0, (size_t)n * sizeof(double));             /* x: the lower sums of the forward solve */\
    for (Py_ssize_t j = 0; j < n; j++) {                  /* y = x1 = (D - L)^{-1} v */               \
        IT p = dpos[j], e = ptr[j + 1];                                                                \
        int on = p < e && col[p] == (IT)j;                                                             \
        if (!keep[j]) { y[j] = fill != 0.0 ? v[j] / fill : 0.0; continue; }                            \
        double dj = on ? -val[p] : 0.0;                                                                \
        double xj = y[j] = dj != 0.0 ? (v[j] - x[j]) / dj : 0.0;                                       \
        for (IT k = p + on; k < e; k++) x[col[k]] += -val[k] * xj;                                     \
    }                                                                                                  \
    memset(x, 0, (size_t)n * sizeof(double));             /* x_i: the upper sum until x_i is made */  \
    Py_ssize_t m = nout;                                                                               \
    for (Py_ssize_t j = n - 1; j >= 0; j--) {             /* x = (D - U)^{-1} D x1 */                 \
        IT p = dpos[j], e = ptr[j + 1];                                                                \
        int on = p < e && col[p] == (IT)j;                                                             \
        if (!keep[j]) {                                                                                \
            x[j] = fill != 0.0 ? (fill * y[j]) / fill : y[j];                                          \
            if (mode == 1) saved[--m] = y[j] = fill != 0.0 ? fill * y[j] : 0.0;                        \
            continue;                                                                                  \
        }                                                                                              \
        double dj = on ? -val[p] : 0.0;                                                                \
        double up = x[j], xj = dj != 0.0 ? (dj * y[j] - up) / dj : y[j];                               \
        x[j] = xj;                                                                                     \
        if (mode == 1) y[j] = dj != 0.0 ? dj * y[j] : up;  /* then + the lower part, below */          \
        for (IT k = ptr[j]; k < p; k++) x[col[k]] += -val[k] * xj;                                     \
        if (mode == 1)                                                                                 \
            for (IT k = p + on; k < e; k++) y[col[k]] += -val[k] * xj;                                 \
    }                                                                                                  \
    if (mode == 1)                                                                                     \
        for (m = 0; m < nout; m++) y[out[m]] = saved[m];                                               \
}

/* The same system untransposed, M = masked(-Q) on Q's own rows (the rows of csr.masked_block of Q): each
 * row gathered in stored order, the left-out columns skipped (their 0 a_ij x_j added nothing), so every
 * number is the row kernels' on that matrix to the bit (the norm's sums apart: in order, not pairwise).
 *   mode 4: x = SSOR(1) v;  mode 5: y = M v;  mode 6: y_i = sum_j |m_ij|;
 *   mode 7: x = SSOR(1) v and y = M x (Eisenstat: (D - U) x = D x1, so M x = D x1 - L x: D x1, or a row's
 *           upper sum where it has no diagonal, kept by the backward pass, then the lower halves gathered
 *           once more on the threads: 1.5 reads of Q where mode 4 then mode 5 take 2). */
#define ROW_KERNELS(IT, SUF)                                                                           \
static void rows_##SUF(int mode, Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,        \
                       const IT *restrict dpos, const double *restrict val, const unsigned char *keep,\
                       const IT *out, Py_ssize_t nout, double fill, const double *restrict v,          \
                       double *restrict x, double *restrict y)                                         \
{                                                                                                      \
    if (mode == 5 || mode == 6) {                         /* independent rows: on the threads */      \
        int nt = threads_for(n);                                                                       \
        (void)nt;                                                                                      \
        _Pragma("omp parallel for schedule(static) num_threads(nt)")                                   \
        for (Py_ssize_t i = 0; i < n; i++) {                                                           \
            double s = 0.0;                                                                            \
            if (!keep[i]) { y[i] = mode == 5 ? fill * v[i] : (fill < 0 ? -fill : fill); continue; }    \
            for (IT k = ptr[i]; k < ptr[i + 1]; k++)                                                   \
                if (keep[col[k]]) s += mode == 5 ? -val[k] * v[col[k]] : (val[k] < 0 ? -val[k] : val[k]); \
            y[i] = s;                                                                                  \
        }                                                                                              \
        return;                                                                                        \
    }                                                                                                  \
    /* the left-out unknowns are 0 during both solves (their columns then add 0, as skipped), set last */ \
    for (Py_ssize_t i = 0; i < n; i++) {                  /* x = (D - L)^{-1} v */                    \
        IT k = ptr[i], p = dpos[i];                                                                    \
        if (!keep[i]) { x[i] = 0.0; continue; }                                                        \
        double s = 0.0, di = (p < ptr[i + 1] && col[p] == (IT)i) ? -val[p] : 0.0;                      \
        for (; k < p; k++) s += -val[k] * x[col[k]];                                                   \
        x[i] = di != 0.0 ? (v[i] - s) / di : 0.0;                                                      \
    }                                                                                                  \
    for (Py_ssize_t i = n - 1; i >= 0; i--) {             /* x = (D - U)^{-1} D x */                  \
        IT k = dpos[i];                                                                                \
        if (!keep[i]) continue;                                                                        \
        double s = 0.0, di = 0.0;                                                                      \
        if (k < ptr[i + 1] && col[k] == (IT)i) di = -val[k++];                                         \
        for (; k < ptr[i + 1]; k++) s += -val[k] * x[col[k]];                                          \
        if (mode == 7) y[i] = di != 0.0 ? di * x[i] : s;  /* then + the lower part, below */          \
        if (di != 0.0) x[i] = (di * x[i] - s) / di;                                                    \
    }                                                                                                  \
    if (mode == 7) {                                      /* y += L-part x: the left-out x still 0 */ \
        int nt = threads_for(n);                                                                       \
        (void)nt;                                                                                      \
        _Pragma("omp parallel for schedule(static) num_threads(nt)")                                   \
        for (Py_ssize_t i = 0; i < n; i++) {                                                           \
            if (!keep[i]) continue;                                                                    \
            double s = 0.0;                                                                            \
            for (IT k = ptr[i]; k < dpos[i]; k++) s += -val[k] * x[col[k]];                            \
            y[i] += s;                                                                                 \
        }                                                                                              \
    }                                                                                                  \
    for (Py_ssize_t m = 0; m < nout; m++) {               /* a left-out row: its diagonal alone */    \
        IT i = out[m];                                                                                 \
        x[i] = fill != 0.0 ? fill * (v[i] / fill) / fill : 0.0;                                        \
        if (mode == 7) y[i] = fill * x[i];                                                             \
    }                                                                                                  \
}

TR_KERNELS(int32_t, i32)
TR_KERNELS(int64_t, i64)
ROW_KERNELS(int32_t, i32)
ROW_KERNELS(int64_t, i64)

static PyObject *py_tr(PyObject *self, PyObject *args)
{
    int mode;
    double fill;
    PyObject *o[8], *ko;
    Py_buffer b[8], kb;                    /* indptr, indices, dpos, data, v, x, y, out; keep (bytes) */
    if (!PyArg_ParseTuple(args, "iOOOOOOdOOO", &mode, &o[0], &o[1], &o[2], &o[3], &ko, &o[7], &fill, &o[4], &o[5],
                          &o[6]))
        return NULL;
    if (get_all(o, b, "iiidddDi", (const char *[]){"indptr", "indices", "dpos", "data", "v", "x", "y", "out"}) < 0)
        return NULL;
    if (PyObject_GetBuffer(ko, &kb, PyBUF_C_CONTIGUOUS) < 0) { release_all(b, 8); return NULL; }
    Py_ssize_t n = NELEM(b[0]) - 1, nout = NELEM(b[7]);
    double *saved = malloc((size_t)(nout + 1) * sizeof(double));
    PyObject *res = saved ? NULL : PyErr_NoMemory();
    if (saved && require(mode >= 0 && mode <= 7 && b[0].itemsize == b[1].itemsize && b[2].itemsize == b[0].itemsize
                && b[7].itemsize == b[0].itemsize && nout <= n
                && n >= 0 && NELEM(b[1]) >= NELEM(b[3]) && NELEM(b[2]) == n && kb.itemsize == 1 && kb.len == n
                && NELEM(b[4]) == n && NELEM(b[5]) == n && NELEM(b[6]) == n
                && (mode == 4 || b[4].buf != b[6].buf)                       /* y written: not v */
                && ((mode > 1 && mode != 7) || b[5].buf != b[6].buf)         /* x and y both written */
                && (!(mode <= 1 || mode == 4 || mode == 7) || (!b[5].readonly && b[4].buf != b[5].buf)),
                "tr: mode 0-7; indptr, indices, dpos, out (the left-out rows, ascending) of one integer type; "
                "keep (bytes), dpos, v, x, y (x written by modes 0, 1, 4, 7 and y by 0-3, 5-7: not v, nor each other) one entry "
                "a row")) {
        Py_BEGIN_ALLOW_THREADS
        if (mode >= 4 && b[0].itemsize == 4)
            rows_i32(mode, n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, kb.buf, b[7].buf, nout, fill, b[4].buf,
                     b[5].buf, b[6].buf);
        else if (mode >= 4)
            rows_i64(mode, n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, kb.buf, b[7].buf, nout, fill, b[4].buf,
                     b[5].buf, b[6].buf);
        else if (b[0].itemsize == 4)
            tr_i32(mode, n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, kb.buf, b[7].buf, nout, fill, saved, b[4].buf,
                   b[5].buf, b[6].buf);
        else
            tr_i64(mode, n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, kb.buf, b[7].buf, nout, fill, saved, b[4].buf,
                   b[5].buf, b[6].buf);
        Py_END_ALLOW_THREADS
        res = Py_None; Py_INCREF(res);
    }
    free(saved);
    PyBuffer_Release(&kb);
    release_all(b, 8);
    return res;
}
