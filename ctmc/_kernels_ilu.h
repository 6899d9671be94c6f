/* ILU(0) of the pinned system on Q's own pattern, included by _kernels.c (get_all, require, release_all,
 * NELEM in scope).
 *
 * M = masked(-Q) (csr.masked_block of Q: m_ij = -q_ij for i, j kept, m_jj = fill for j not kept, 0
 * elsewhere) is factored M ~ L U on Q's stored pattern (L unit lower, U upper; row by row, IKJ order, no
 * fill outside the pattern: Saad, Iterative Methods, alg. 10.4). The factor is values only: lu[k] holds
 * l_ik or u_ik at Q's position k, dinv[i] = 1 / u_ii; the left-out rows are fill alone (no off-diagonal).
 * The Krylov system of the stationary solve is A = M^T ~ U^T L^T, read from the same rows (A's columns):
 *   mode 0: factor (returns the first row with a pivot that is not > 0 and finite, or -1);
 *   mode 1: x = (U^T L^T)^{-1} v = L^{-T} U^{-T} v (w scratch), both solves scattering over Q's rows;
 *   mode 2: the same and y = A x, the product scattered row by row in the backward pass as each x_j is
 *           made (Q's values read once more, the indices not);
 *   mode 3: x = (L U)^{-1} v for M itself (the return-time system of the error bound), gathering rows.
 * Sequential, like the scatter passes of _kernels_tr.h. */

#define ILU_KERNELS(IT, SUF)                                                                           \
static Py_ssize_t ilu_factor_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,      \
                                   const IT *restrict dpos, const double *restrict val,                \
                                   const unsigned char *keep, double fill, double *restrict lu,        \
                                   double *restrict dinv, IT *restrict where)                          \
{                                                                                                      \
    for (Py_ssize_t i = 0; i < n; i++) where[i] = -1;                                                  \
    for (Py_ssize_t i = 0; i < n; i++) {                                                               \
        IT a = ptr[i], e = ptr[i + 1], p = dpos[i];                                                    \
        int on = p < e && col[p] == (IT)i;                                                             \
        if (!keep[i]) {                                                                                \
            for (IT k = a; k < e; k++) lu[k] = 0.0;                                                    \
            dinv[i] = 1.0 / fill;                                                                      \
            if (!(fill > 0.0) || !(dinv[i] < HUGE_VAL)) return i;                                      \
            continue;                                                                                  \
        }                                                                                              \
        for (IT k = a; k < e; k++) {                                                                   \
            lu[k] = keep[col[k]] ? -val[k] : 0.0;                                                      \
            where[col[k]] = k;                                                                         \
        }                                                                                              \
        for (IT k = a; k < p; k++) {                      /* the lower part, columns ascending */      \
            IT c = col[k];                                                                             \
            if (lu[k] == 0.0) continue;                                                                \
            double l = lu[k] *= dinv[c];                                                               \
            IT q = dpos[c], qe = ptr[c + 1];                                                           \
            if (q < qe && col[q] == c) q++;                                                            \
            for (; q < qe; q++) {                         /* row c of U, beyond its diagonal */        \
                IT t = where[col[q]];                                                                  \
                if (t >= 0) lu[t] -= l * lu[q];                                                        \
            }                                                                                          \
        }                                                                                              \
        double d = on ? lu[p] : 0.0;                                                                   \
        for (IT k = a; k < e; k++) where[col[k]] = -1;                                                 \
        if (!(d > 0.0) || !(1.0 / d < HUGE_VAL)) return i;                                             \
        dinv[i] = 1.0 / d;                                                                             \
        if (on) lu[p] = 0.0;                              /* the pivot lives in dinv */                \
    }                                                                                                  \
    return -1;                                                                                         \
}                                                                                                      \
                                                                                                       \
static void ilu_apply_##SUF(int mode, Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,   \
                            const IT *restrict dpos, const double *restrict val,                       \
                            const unsigned char *keep, const IT *out, Py_ssize_t nout, double fill,    \
                            const double *restrict lu, const double *restrict dinv,                    \
                            const double *restrict v, double *restrict x, double *restrict y,          \
                            double *restrict w)                                                        \
{                                                                                                      \
    if (mode == 3) {                                      /* M: L then U, each row gathered */         \
        for (Py_ssize_t i = 0; i < n; i++) {                                                           \
            double s = v[i];                                                                           \
            for (IT k = ptr[i]; k < dpos[i]; k++) s -= lu[k] * x[col[k]];                              \
            x[i] = s;                                                                                  \
        }                                                                                              \
        for (Py_ssize_t i = n - 1; i >= 0; i--) {                                                      \
            double s = x[i];                                                                           \
            for (IT k = dpos[i]; k < ptr[i + 1]; k++) s -= lu[k] * x[col[k]];                          \
            x[i] = s * dinv[i];                                                                        \
        }                                                                                              \
        return;                                                                                        \
    }                                                                                                  \
    memset(x, 0, (size_t)n * sizeof(double));             /* w = U^{-T} v, x the sums */               \
    for (Py_ssize_t j = 0; j < n; j++) {                                                               \
        double wj = w[j] = (v[j] - x[j]) * dinv[j];                                                    \
        for (IT k = dpos[j]; k < ptr[j + 1]; k++) x[col[k]] += lu[k] * wj;                             \
    }                                                                                                  \
    if (mode == 2) memset(y, 0, (size_t)n * sizeof(double));                                           \
    for (Py_ssize_t j = n - 1; j >= 0; j--) {             /* x = L^{-T} w, w the sums */               \
        double xj = x[j] = w[j];                                                                       \
        IT a = ptr[j], p = dpos[j];                                                                    \
        for (IT k = a; k < p; k++) w[col[k]] -= lu[k] * xj;                                            \
        if (mode == 2 && keep[j])                         /* y += x_j (row j of M) */                  \
            for (IT k = a; k < ptr[j + 1]; k++) y[col[k]] -= val[k] * xj;                              \
    }                                                                                                  \
    if (mode == 2)                                        /* the left-out rows: fill x_j alone */      \
        for (Py_ssize_t m = 0; m < nout; m++) y[out[m]] = fill * x[out[m]];                            \
}

ILU_KERNELS(int32_t, i32)
ILU_KERNELS(int64_t, i64)

/* ilu0(mode, indptr, indices, dpos, data, keep, out, fill, lu, dinv, v, x, y, w) */
static PyObject *py_ilu0(PyObject *self, PyObject *args)
{
    int mode;
    double fill;
    PyObject *o[11], *ko;
    Py_buffer b[11], kb;          /* indptr, indices, dpos, data, out, lu, dinv, v, x, y, w; keep (bytes) */
    if (!PyArg_ParseTuple(args, "iOOOOOOdOOOOOO", &mode, &o[0], &o[1], &o[2], &o[3], &ko, &o[4], &fill, &o[5],
                          &o[6], &o[7], &o[8], &o[9], &o[10]))
        return NULL;
    if (get_all(o, b, mode == 0 ? "iiidiDDdDDD" : "iiididdDDDD",
                (const char *[]){"indptr", "indices", "dpos", "data", "out", "lu", "dinv", "v", "x", "y", "w"}) < 0)
        return NULL;
    if (PyObject_GetBuffer(ko, &kb, PyBUF_C_CONTIGUOUS) < 0) { release_all(b, 11); return NULL; }
    Py_ssize_t n = NELEM(b[0]) - 1, nout = NELEM(b[4]), isz = b[0].itemsize;
    void *where = mode == 0 ? malloc((size_t)(n + 1) * (size_t)isz) : NULL;
    PyObject *res = (mode != 0 || where) ? NULL : PyErr_NoMemory();
    if ((mode != 0 || where)
        && require(mode >= 0 && mode <= 3 && n >= 0 && b[1].itemsize == isz && b[2].itemsize == isz
                   && b[4].itemsize == isz && NELEM(b[2]) == n && NELEM(b[1]) >= NELEM(b[3])
                   && NELEM(b[5]) == NELEM(b[3]) && NELEM(b[6]) == n && kb.itemsize == 1 && kb.len == n
                   && nout <= n && NELEM(b[7]) == n && NELEM(b[8]) == n && NELEM(b[9]) == n && NELEM(b[10]) == n
                   && (mode == 0 || (b[7].buf != b[8].buf && b[7].buf != b[10].buf && b[8].buf != b[10].buf
                                     && (mode != 2 || (b[9].buf != b[7].buf && b[9].buf != b[8].buf
                                                       && b[9].buf != b[10].buf)))),
                   "ilu0: mode 0-3; indptr, indices, dpos, out of one integer type; lu one value an entry of "
                   "data; keep (bytes), dpos, dinv, v, x, y, w one entry a row; v, x, w (and y in mode 2) "
                   "distinct")) {
        Py_ssize_t bad = -1;
        Py_BEGIN_ALLOW_THREADS
        if (mode == 0 && isz == 4)
            bad = ilu_factor_i32(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, kb.buf, fill, b[5].buf, b[6].buf, where);
        else if (mode == 0)
            bad = ilu_factor_i64(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, kb.buf, fill, b[5].buf, b[6].buf, where);
        else if (isz == 4)
            ilu_apply_i32(mode, n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, kb.buf, b[4].buf, nout, fill, b[5].buf,
                          b[6].buf, b[7].buf, b[8].buf, b[9].buf, b[10].buf);
        else
            ilu_apply_i64(mode, n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, kb.buf, b[4].buf, nout, fill, b[5].buf,
                          b[6].buf, b[7].buf, b[8].buf, b[9].buf, b[10].buf);
        Py_END_ALLOW_THREADS
        res = PyLong_FromSsize_t(bad);
    }
    free(where);
    PyBuffer_Release(&kb);
    release_all(b, 11);
    return res;
}

#define ILU_METHODS {"ilu0", py_ilu0, METH_VARARGS, "ilu0(mode, indptr, indices, dpos, data, keep, out, fill, " \
    "lu, dinv, v, x, y, w) -> a bad pivot's row or -1: ILU(0) of masked(-Q) on Q's rows (see _kernels_ilu.h)"},
