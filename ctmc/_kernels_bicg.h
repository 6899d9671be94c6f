/* BiCGStab's vector steps (ctmc.krylov.bicgstab), included by _kernels.c: its helpers (dot, BLOCK_ROWS,
 * reduce_blocks, get_all, ...) are in scope. */

/* ---- BiCGStab's vector steps (ctmc.krylov.bicgstab) ------------------------------------------- */

/* Each is one pass over its vectors, the rows split among the threads by blocks of BLOCK rows; its
 * sums are made per block (dot()'s order) and added in block order: the threads change no result. */

/* p = r + beta (p - omega v) */
HOT static void bicg_dir_block(double *restrict p, const double *restrict r, const double *restrict v,
                               double beta, double omega, Py_ssize_t len)
{
    for (Py_ssize_t i = 0; i < len; i++) p[i] = r[i] + beta * (p[i] - omega * v[i]);
}

/* s = r - alpha v, x += alpha ph; returns s.s (s may be r: BiCGStab keeps its half step in the residual's
 * vector, and P s in P p's once x has taken alpha P p) */
HOT static double bicg_half_block(double *s, const double *r, const double *restrict v, double *restrict x,
                                  const double *restrict ph, double alpha, Py_ssize_t len)
{
    for (Py_ssize_t i = 0; i < len; i++) {
        s[i] = r[i] - alpha * v[i];
        x[i] = x[i] + alpha * ph[i];
    }
    return dot(s, s, len);
}

/* x += alpha ph + omega sh; r = s - omega t; part = (r.r, rhat.r, max r/b, max -r/b over b > 0,
 * max |r| over b <= 0) (b NULL: the last three 0). s may be r and sh may be ph or s (one element read
 * before it is written): BiCGStab's half step in the residual's vector, P s in P p's */
HOT static void bicg_update_block(double *restrict x, double *r, const double *ph,
                                  const double *sh, const double *s, const double *restrict t,
                                  const double *restrict rhat, const double *restrict b, double alpha,
                                  double omega, Py_ssize_t len, double *part)
{
    for (Py_ssize_t i = 0; i < len; i++) {
        x[i] = (x[i] + alpha * ph[i]) + omega * sh[i];
        r[i] = s[i] - omega * t[i];
    }
    part[0] = dot(r, r, len);
    part[1] = dot(rhat, r, len);
    double hi = 0.0, lo = 0.0, off = 0.0;
    if (b)
        for (Py_ssize_t i = 0; i < len; i++) {
            if (b[i] > 0.0) {
                double q = r[i] / b[i];
                if (q > hi) hi = q;
                if (-q > lo) lo = -q;
            } else {
                double a = r[i] < 0.0 ? -r[i] : r[i];
                if (!(a <= off)) off = a;            /* a NaN sticks */
            }
        }
    part[2] = hi; part[3] = lo; part[4] = off;
}

/* args: "d"-kind buffers of one length n; returns n or -1 with an error set */
static Py_ssize_t same_length(Py_buffer *b, int k, const char *name)
{
    Py_ssize_t n = NELEM(b[0]);
    for (int i = 1; i < k; i++)
        if (NELEM(b[i]) != n) {
            PyErr_Format(PyExc_ValueError, "%s: the vectors must have one length", name);
            return -1;
        }
    return n;
}

static PyObject *py_bicg_dir(PyObject *self, PyObject *args)
{
    PyObject *o[3];
    Py_buffer b[3];                                       /* p, r, v */
    double beta, omega;
    if (!PyArg_ParseTuple(args, "OOOdd", &o[0], &o[1], &o[2], &beta, &omega)) return NULL;
    if (get_all(o, b, "Ddd", (const char *[]){"p", "r", "v"}) < 0) return NULL;
    Py_ssize_t n = same_length(b, 3, "bicg_dir");
    PyObject *res = NULL;
    if (n >= 0) {
        Py_ssize_t nb = (n + BLOCK - 1) / BLOCK;
        int nt = threads_for(n);
        double *p = b[0].buf;
        const double *r = b[1].buf, *v = b[2].buf;
        (void)nt;
        Py_BEGIN_ALLOW_THREADS
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (Py_ssize_t q = 0; q < nb; q++) {
            BLOCK_ROWS(q, n, r0, len);
            bicg_dir_block(p + r0, r + r0, v + r0, beta, omega, len);
        }
        Py_END_ALLOW_THREADS
        res = Py_None; Py_INCREF(res);
    }
    release_all(b, 3);
    return res;
}

static PyObject *py_bicg_half(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    Py_buffer b[5];                                       /* s, r, v, x, ph */
    double alpha;
    if (!PyArg_ParseTuple(args, "OOOdOO", &o[0], &o[1], &o[2], &alpha, &o[3], &o[4])) return NULL;
    if (get_all(o, b, "DddDd", (const char *[]){"s", "r", "v", "x", "ph"}) < 0) return NULL;
    Py_ssize_t n = same_length(b, 5, "bicg_half");
    PyObject *res = NULL;
    if (n >= 0) {
        Py_ssize_t nb = (n + BLOCK - 1) / BLOCK;
        int nt = threads_for(n);
        double *s = b[0].buf, *x = b[3].buf, *part = malloc(sizeof(double) * (size_t)(nb + 1));
        const double *r = b[1].buf, *v = b[2].buf, *ph = b[4].buf;
        if (!part) PyErr_NoMemory();
        else {
            double ss;
            (void)nt;
            Py_BEGIN_ALLOW_THREADS
            #pragma omp parallel for schedule(static) num_threads(nt)
            for (Py_ssize_t q = 0; q < nb; q++) {
                BLOCK_ROWS(q, n, r0, len);
                part[q] = bicg_half_block(s + r0, r + r0, v + r0, x + r0, ph + r0, alpha, len);
            }
            reduce_blocks(part, nb, 1, &ss);
            Py_END_ALLOW_THREADS
            free(part);
            res = PyFloat_FromDouble(ss);
        }
    }
    release_all(b, 5);
    return res;
}

static PyObject *py_dot2(PyObject *self, PyObject *args)
{
    PyObject *o[3];
    Py_buffer b[3];                                       /* a, u, w */
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2])) return NULL;
    if (get_all(o, b, "ddd", (const char *[]){"a", "u", "w"}) < 0) return NULL;
    Py_ssize_t n = same_length(b, 3, "dot2");
    PyObject *res = NULL;
    if (n >= 0) {
        Py_ssize_t nb = (n + BLOCK - 1) / BLOCK;
        int nt = threads_for(n);
        const double *a = b[0].buf, *u = b[1].buf, *w = b[2].buf;
        double *part = malloc(sizeof(double) * (size_t)(2 * nb + 2)), out[2];
        if (!part) PyErr_NoMemory();
        else {
            (void)nt;
            Py_BEGIN_ALLOW_THREADS
            #pragma omp parallel for schedule(static) num_threads(nt)
            for (Py_ssize_t q = 0; q < nb; q++) {
                BLOCK_ROWS(q, n, r0, len);
                part[2 * q] = dot(a + r0, u + r0, len);
                part[2 * q + 1] = dot(a + r0, w + r0, len);
            }
            reduce_blocks(part, nb, 2, out);
            Py_END_ALLOW_THREADS
            free(part);
            res = Py_BuildValue("(dd)", out[0], out[1]);
        }
    }
    release_all(b, 3);
    return res;
}

static PyObject *py_bicg_update(PyObject *self, PyObject *args)
{
    PyObject *o[8], *ob;
    Py_buffer b[8], bb;                                   /* x, r, ph, sh, s, t, rhat, out; b */
    double alpha, omega;
    if (!PyArg_ParseTuple(args, "OOOOOOOOddO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &ob, &alpha,
                          &omega, &o[7])) return NULL;
    if (get_all(o, b, "DDddddD" "D", (const char *[]){"x", "r", "ph", "sh", "s", "t", "rhat", "out"}) < 0)
        return NULL;
    int hasb = ob != Py_None;
    if (hasb && get(ob, &bb, 'd', 0, "b") < 0) { release_all(b, 8); return NULL; }
    Py_ssize_t n = same_length(b, 7, "bicg_update");
    PyObject *res = NULL;
    if (n >= 0 && require(NELEM(b[7]) >= 5 && (!hasb || NELEM(bb) == n),
                          "bicg_update: out must hold 5 numbers and b have the vectors' length")) {
        Py_ssize_t nb = (n + BLOCK - 1) / BLOCK;
        int nt = threads_for(n);
        double *x = b[0].buf, *r = b[1].buf, *out = b[7].buf;
        const double *ph = b[2].buf, *sh = b[3].buf, *s = b[4].buf, *t = b[5].buf, *rh = b[6].buf;
        const double *bv = hasb ? bb.buf : NULL;
        double *part = malloc(sizeof(double) * (size_t)(5 * nb + 5));
        if (!part) PyErr_NoMemory();
        else {
            (void)nt;
            Py_BEGIN_ALLOW_THREADS
            #pragma omp parallel for schedule(static) num_threads(nt)
            for (Py_ssize_t q = 0; q < nb; q++) {
                BLOCK_ROWS(q, n, r0, len);
                bicg_update_block(x + r0, r + r0, ph + r0, sh + r0, s + r0, t + r0, rh + r0, bv ? bv + r0 : NULL,
                                  alpha, omega, len, part + 5 * q);
            }
            out[0] = out[1] = out[2] = out[3] = out[4] = 0.0;
            for (Py_ssize_t q = 0; q < nb; q++) {
                const double *c = part + 5 * q;
                out[0] += c[0]; out[1] += c[1];
                if (c[2] > out[2]) out[2] = c[2];
                if (c[3] > out[3]) out[3] = c[3];
                if (!(c[4] <= out[4])) out[4] = c[4];
            }
            Py_END_ALLOW_THREADS
            free(part);
            res = Py_None; Py_INCREF(res);
        }
    }
    if (hasb) PyBuffer_Release(&bb);
    release_all(b, 8);
    return res;
}
