/* The structure kernels of a stationary solve's set-up: one pass over a CSR generator each, no copy of it.
 *
 * Included by _kernels.c (it uses that file's buffer helpers get/require/release_all/NELEM and
 * threads_for). Every routine has a numpy/scipy fallback in ctmc/backends/csr.py or
 * ctmc/kernels/classes.py giving the same results to the bit; the tests compare the two.
 *
 * select   the entries of a CSR matrix kept by a rule, renumbered: the rates R of Q (the diagonal and
 *          stored zeros dropped), or the principal block M = diag(d) - R_XX on a member set X; a count
 *          pass (the new row pointer) then a fill pass, rows split among the threads.
 * colcount the rates in each column of Q (the rows of Q^T), from Q's rows.
 * product  R x or Q x by rows (a gather, threaded), or R^T x, Q^T x by the rows of Q (a scatter, in
 *          row order: each sum adds the same terms in the same order as a product with Q^T's sorted
 *          rows, so the same numbers as the transpose without making it).
 * reach    breadth-first search from a seed mask along the rows (optionally only into allowed states,
 *          optionally skipping stored zeros).
 * lowcols  the smallest column of a non-zero entry in each row (the envelope of structure_facts), or
 *          of each column from the rows (the rows of A^T without making it).
 * scc      the strongly connected components of the rows' graph (Pearce's one-index variant of
 *          Tarjan's search, iterative) and which of them no edge leaves: the closed classes from
 *          Q's rows alone, where a search backwards would need Q^T.
 * walk     the jump chain of walk_pin: from a state, the next one drawn by the running sum of the row's
 *          rates (the diagonal weighs nothing) against u * (their sum).
 * absmax   max_i sum_j |a_ij| summed as numpy's add.reduceat does (scipy's abs(A).sum(axis=1)): the
 *          first entry plus numpy's pairwise sum of the others, to the bit.
 */
#include <math.h>
#include <stdint.h>

#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)0)
#endif

/* an optional buffer: None gives buf = NULL; kind 'm' is a mask (bool or uint8), else as get() */
static int get_opt(PyObject *obj, Py_buffer *view, char kind, int writable, const char *name)
{
    if (obj == Py_None) { memset(view, 0, sizeof(*view)); return 0; }
    if (kind != 'm') return get(obj, view, kind, writable, name);
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@' || *f == '|') f++;
    if (!(view->itemsize == 1 && strchr("?Bb", *f) != NULL)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a contiguous bool array", name);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* like get_all, with spec letters as get_opt's kinds (m/M a mask, upper case writable), and '-' before a
 * letter for "may be None" (then buf = NULL). All of them, or none (-1, an exception set). */
static int get_some(PyObject *const *objs, Py_buffer *views, const char *spec, const char *const *names)
{
    int i = 0;
    for (const char *c = spec; *c; c++, i++) {
        int opt = (*c == '-');
        if (opt) c++;
        int w = (*c == 'D' || *c == 'I' || *c == 'M');
        char kind = w ? (char)(*c - 'A' + 'a') : *c;
        int rc;
        if (opt || kind == 'm') rc = (!opt && objs[i] == Py_None) ? -1 : get_opt(objs[i], &views[i], kind, w, names[i]);
        else rc = get(objs[i], &views[i], kind, w, names[i]);
        if (rc < 0) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s must not be None", names[i]);
            while (i--) if (views[i].obj) PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    return 0;
}

static void release_some(Py_buffer *views, int k)
{
    for (int i = 0; i < k; i++) if (views[i].obj) PyBuffer_Release(&views[i]);
}

/* numpy's pairwise summation (numpy/core/src/umath/loops_utils.h.src, pairwise_sum) of |a[0..n-1]|: below
 * 8 terms in order from 0; up to 128, eight running sums combined as a tree, then the rest in order; beyond,
 * the two halves (the first a multiple of 8) */
static double pairwise_abs(const double *a, Py_ssize_t n)
{
    if (n < 8) {
        double res = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) res += fabs(a[i]);
        return res;
    }
    if (n <= 128) {
        double r[8];
        Py_ssize_t i;
        for (int j = 0; j < 8; j++) r[j] = fabs(a[j]);
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += fabs(a[i + j]);
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += fabs(a[i]);
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_abs(a, n2) + pairwise_abs(a + n2, n - n2);
}

/* ---- select: count and fill, for input index type IT and output index type OT ------------------ */

/* Row i (of n) is kept when mem is NULL or mem[i]; its entries (i, j, v):
 *   j == first + i (the diagonal): kept iff d != NULL and d[newrow] != 0, as d[newrow];
 *   otherwise: kept iff (mem NULL or mem[j]) and v != 0, as (neg ? -v : v), at column pos[j] (or j).
 * Count: cnt[newrow + 1] = entries kept; returns -1 if, with d, a kept row stores not exactly one diagonal
 * entry. Fill: writes the kept entries at optr[newrow]. */
#define SELECT_KERNELS(IT, OT, SUF)                                                                    \
static int select_count_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,           \
                              const double *restrict val, Py_ssize_t first, const uint8_t *restrict mem,\
                              const double *restrict d, const OT *restrict pos, OT *restrict cnt)      \
{                                                                                                      \
    int bad = 0, nt = threads_for(n);                                                                  \
    (void)nt;                                                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nt) reduction(|:bad)")                      \
    for (Py_ssize_t i = 0; i < n; i++) {                                                               \
        if (mem && !mem[i]) continue;                                                                  \
        Py_ssize_t r = mem ? (Py_ssize_t)pos[i] : i, c = 0, diag = 0;                                  \
        for (IT k = ptr[i]; k < ptr[i + 1]; k++) {                                                     \
            Py_ssize_t j = (Py_ssize_t)col[k];                                                         \
            if (mem && (j < 0 || j >= n)) { bad = 2; continue; }                                       \
            if (j == first + i) { diag++; c += (d && d[r] != 0.0); }                                   \
            else c += (val[k] != 0.0) && (!mem || mem[j]);                                             \
        }                                                                                              \
        if (d && diag != 1) bad |= 1;                                                                  \
        cnt[r + 1] = (OT)c;                                                                            \
    }                                                                                                  \
    return -bad;                                                                                       \
}                                                                                                      \
static void select_fill_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,           \
                              const double *restrict val, Py_ssize_t first, const uint8_t *restrict mem,\
                              const double *restrict d, const OT *restrict pos, int neg,               \
                              const OT *restrict optr, OT *restrict ocol, double *restrict oval)       \
{                                                                                                      \
    int nt = threads_for(n);                                                                           \
    (void)nt;                                                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nt)")                                       \
    for (Py_ssize_t i = 0; i < n; i++) {                                                               \
        if (mem && !mem[i]) continue;                                                                  \
        Py_ssize_t r = mem ? (Py_ssize_t)pos[i] : i;                                                   \
        OT at = optr[r];                                                                               \
        for (IT k = ptr[i]; k < ptr[i + 1]; k++) {                                                     \
            Py_ssize_t j = (Py_ssize_t)col[k];                                                         \
            if (j == first + i) {                                                                      \
                if (d && d[r] != 0.0) { ocol[at] = (OT)(mem ? (Py_ssize_t)pos[j] : j); oval[at++] = d[r]; } \
            } else if (val[k] != 0.0 && (!mem || mem[j])) {                                            \
                ocol[at] = (OT)(mem ? (Py_ssize_t)pos[j] : j);                                         \
                oval[at++] = neg ? -val[k] : val[k];                                                   \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
}

SELECT_KERNELS(int32_t, int32_t, i32_i32)
SELECT_KERNELS(int32_t, int64_t, i32_i64)
SELECT_KERNELS(int64_t, int32_t, i64_i32)
SELECT_KERNELS(int64_t, int64_t, i64_i64)

/* ---- the other kernels, for one index type IT ------------------------------------------------- */

#define GRAPH_KERNELS(IT, SUF)                                                                         \
static int colcount_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,               \
                          const double *restrict val, Py_ssize_t first, int64_t *restrict out,         \
                          Py_ssize_t nc)                                                               \
{                                                                                                      \
    for (Py_ssize_t i = 0; i < n; i++)                                                                 \
        for (IT k = ptr[i]; k < ptr[i + 1]; k++) {                                                     \
            if (col[k] < 0 || (Py_ssize_t)col[k] >= nc) return -1;                                     \
            if ((Py_ssize_t)col[k] != first + i && val[k] != 0.0) out[col[k]]++;                       \
        }                                                                                              \
    return 0;                                                                                          \
}                                                                                                      \
static int product_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,               \
                          const double *restrict val, Py_ssize_t first, int offdiag, int transpose,    \
                          const double *restrict x, double *restrict y, Py_ssize_t ny)               \
{                                                                                                      \
    if (transpose) {                        /* y = A^T x: y[j] += a_ij x_i, rows in order */          \
        for (Py_ssize_t j = 0; j < ny; j++) y[j] = 0.0;                                                \
        for (Py_ssize_t i = 0; i < n; i++) {                                                           \
            double xi = x[i];                                                                          \
            for (IT k = ptr[i]; k < ptr[i + 1]; k++) {                                                 \
                if (offdiag && ((Py_ssize_t)col[k] == first + i || val[k] == 0.0)) continue;           \
                if (col[k] < 0 || (Py_ssize_t)col[k] >= ny) return -1;                                 \
                y[col[k]] += val[k] * xi;                                                              \
            }                                                                                          \
        }                                                                                              \
        return 0;                                                                                      \
    }                                                                                                  \
    int nt = threads_for(n);                                                                           \
    (void)nt;                                                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nt)")                                       \
    for (Py_ssize_t i = 0; i < n; i++) {                                                               \
        double s = 0.0;                                                                                \
        for (IT k = ptr[i]; k < ptr[i + 1]; k++) {                                                     \
            if (offdiag && ((Py_ssize_t)col[k] == first + i || val[k] == 0.0)) continue;               \
            s += val[k] * x[col[k]];                                                                   \
        }                                                                                              \
        y[i] = s;                                                                                      \
    }                                                                                                  \
    return 0;                                                                                          \
}                                                                                                      \
/* mark: the seeds on entry, every state reached on exit; returns the number marked, -1 out of memory,  \
 * -2 for a column outside the rows */ \
static Py_ssize_t reach_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,           \
                              const double *restrict val, uint8_t *restrict mark,                      \
                              const uint8_t *restrict within)                                          \
{                                                                                                      \
    IT *queue = (IT *)malloc((size_t)(n > 0 ? n : 1) * sizeof(IT));                                    \
    if (!queue) return -1;                                                                             \
    Py_ssize_t head = 0, tail = 0;                                                                     \
    for (Py_ssize_t i = 0; i < n; i++) if (mark[i]) { mark[i] = 1; queue[tail++] = (IT)i; }            \
    if (tail == n) { free(queue); return tail; }          /* every state a seed: nothing to search */ \
    while (head < tail) {                                                                              \
        /* the rows of states further in the queue fetched ahead (a search jumps around the arrays) */ \
        if (head + 16 < tail) PREFETCH(&ptr[queue[head + 16]]);                                        \
        if (head + 8 < tail) {                                                                         \
            IT w = queue[head + 8];                                                                    \
            PREFETCH(&col[ptr[w]]);                                                                    \
            if (val) PREFETCH(&val[ptr[w]]);                                                           \
        }                                                                                              \
        IT u = queue[head++];                                                                          \
        for (IT k = ptr[u]; k < ptr[u + 1]; k++) {                                                     \
            IT v = col[k];                                                                             \
            if (v < 0 || (Py_ssize_t)v >= n) { free(queue); return -2; }                               \
            if (mark[v] || (within && !within[v]) || (val && val[k] == 0.0)) continue;                 \
            mark[v] = 1;                                                                               \
            queue[tail++] = v;                                                                         \
        }                                                                                              \
    }                                                                                                  \
    free(queue);                                                                                       \
    return tail;                                                                                       \
}                                                                                                      \
static void lowcols_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,               \
                          const double *restrict val, int64_t *restrict low, int transpose)            \
{                                                                                                      \
    if (transpose) {                  /* low[j] = min(low[j], the first row i with a non-zero a_ij) */ \
        for (Py_ssize_t i = 0; i < n; i++)                                                             \
            for (IT k = ptr[i]; k < ptr[i + 1]; k++)                                                   \
                if (val[k] != 0.0 && (int64_t)i < low[col[k]]) low[col[k]] = (int64_t)i;              \
        return;                                                                                        \
    }                                                                                                  \
    int nt = threads_for(n);                                                                           \
    (void)nt;                                                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nt)")                                       \
    for (Py_ssize_t i = 0; i < n; i++) {                                                               \
        int64_t m = low[i];                                                                            \
        for (IT k = ptr[i]; k < ptr[i + 1]; k++)                                                       \
            if (val[k] != 0.0 && (int64_t)col[k] < m) m = (int64_t)col[k];                            \
        low[i] = m;                                                                                    \
    }                                                                                                  \
}                                                                                                      \
/* steps of the jump chain from s: path[k] the state before jump k; returns the jumps made (fewer than \
 * nu when path[k] has no rate out), -1 out of memory, -2 for a jump outside the rows. The running sum c of row s's entries, the   \
 * diagonal weighing 0, in stored order; the next state is the first entry with c > u_k * (its total), \
 * or the last, moved back past entries that add nothing to c. */                                     \
static Py_ssize_t walk_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,            \
                             const double *restrict val, Py_ssize_t first, const double *restrict q,  \
                             Py_ssize_t s, const double *restrict u, Py_ssize_t nu, int64_t *restrict path) \
{                                                                                                      \
    Py_ssize_t room = 0;                                                                               \
    double *c = NULL;                                                                                  \
    for (Py_ssize_t k = 0; k < nu; k++) {                                                              \
        path[k] = (int64_t)s;                                                                          \
        IT a = ptr[s], b = ptr[s + 1];                                                                 \
        if (b == a || !(q[s] > 0.0)) { free(c); return k; }                                            \
        if ((Py_ssize_t)(b - a) > room) {                                                              \
            free(c);                                                                                   \
            room = 2 * (Py_ssize_t)(b - a);                                                            \
            c = (double *)malloc((size_t)room * sizeof(double));                                       \
            if (!c) return -1;                                                                         \
        }                                                                                              \
        double t = 0.0;                       /* numpy's cumsum: c[0] = w[0], c[e] = c[e - 1] + w[e] */ \
        for (IT e = a; e < b; e++) {                                                                   \
            double w = ((Py_ssize_t)col[e] == first + s) ? 0.0 : val[e];                               \
            t = (e == a) ? w : t + w;                                                                  \
            c[e - a] = t;                                                                              \
        }                                                                                              \
        double target = u[k] * t;                                                                      \
        Py_ssize_t lo = 0, hi = (Py_ssize_t)(b - a);      /* the first c > target (searchsorted right) */ \
        while (lo < hi) {                                                                              \
            Py_ssize_t mid = lo + (hi - lo) / 2;                                                       \
            if (c[mid] > target) hi = mid; else lo = mid + 1;                                          \
        }                                                                                              \
        Py_ssize_t j = lo < (Py_ssize_t)(b - a) - 1 ? lo : (Py_ssize_t)(b - a) - 1;                    \
        while (j > 0 && !(c[j] > c[j - 1])) j--;                                                       \
        s = (Py_ssize_t)col[a + j] - first;                                                            \
        if (s < 0 || s >= n) { free(c); return -2; }                                                   \
    }                                                                                                  \
    free(c);                                                                                           \
    return nu;                                                                                         \
}

GRAPH_KERNELS(int32_t, i32)
GRAPH_KERNELS(int64_t, i64)

/* The strongly connected components of the graph of A's rows (an edge i -> j for each stored entry
 * j != i, non-zero where val is given) and which of them are closed (no edge leaves). Pearce's variant of
 * Tarjan's search (one index a vertex; "A space-efficient algorithm for finding strongly connected
 * components", IPL 116, 2016), iterative: rindex[v] is v's visit number while v is open, the number
 * n - c of its component once closed (c = 0, 1, ... in the order the components complete), so
 * label[v] = n - rindex[v] at the end. Work: four vectors of IT and one byte a vertex, freed on return.
 * closed[c] = 1 for the closed components c < (returned count); -1 out of memory, -2 a column outside
 * the rows. */
#define SCC_KERNEL(IT, SUF)                                                                            \
static Py_ssize_t scc_##SUF(Py_ssize_t n, const IT *restrict ptr, const IT *restrict col,              \
                            const double *restrict val, IT *restrict rindex, uint8_t *restrict closed) \
{                                                                                                      \
    size_t m = (size_t)(n > 0 ? n : 1);                                                                \
    IT *stack = (IT *)malloc(m * sizeof(IT)), *calls = (IT *)malloc(m * sizeof(IT));                   \
    IT *next = (IT *)malloc(m * sizeof(IT));                                                           \
    uint8_t *root = (uint8_t *)malloc(m);                                                              \
    Py_ssize_t rc = 0;                                                                                 \
    if (!stack || !calls || !next || !root) { rc = -1; goto done; }                                   \
    for (Py_ssize_t i = 0; i < n; i++) rindex[i] = 0;                                                  \
    Py_ssize_t index = 1, c = n, sp = 0;          /* c: the next component's rindex, counting down */  \
    for (Py_ssize_t s0 = 0; s0 < n; s0++) {                                                            \
        if (rindex[s0]) continue;                                                                      \
        Py_ssize_t depth = 0;                                                                          \
        calls[depth++] = (IT)s0; rindex[s0] = (IT)index++; root[s0] = 1; next[s0] = ptr[s0];          \
        while (depth) {                                                                                \
            IT v = calls[depth - 1];                                                                   \
            IT k = next[v];                                                                            \
            if (k < ptr[v + 1]) {                                                                      \
                IT w = col[k];                                                                         \
                if (w < 0 || (Py_ssize_t)w >= n) { rc = -2; goto done; }                               \
                if (w == v || (val && val[k] == 0.0)) { next[v] = k + 1; continue; }                   \
                if (!rindex[w]) {                 /* a call: edge k is looked at again on return */    \
                    calls[depth++] = w; rindex[w] = (IT)index++; root[w] = 1; next[w] = ptr[w];        \
                    continue;                                                                          \
                }                                                                                      \
                if (rindex[w] < rindex[v]) { rindex[v] = rindex[w]; root[v] = 0; }                     \
                next[v] = k + 1;                                                                       \
                continue;                                                                              \
            }                                                                                          \
            depth--;                                                                                   \
            if (!root[v]) { stack[sp++] = v; continue; }                                               \
            index--;                                  /* v and the open vertices above it: one class */ \
            while (sp && rindex[v] <= rindex[stack[sp - 1]]) { rindex[stack[--sp]] = (IT)c; index--; } \
            rindex[v] = (IT)c--;                                                                       \
        }                                                                                              \
    }                                                                                                  \
    rc = n - c;                                                                                        \
    for (Py_ssize_t i = 0; i < rc; i++) closed[i] = 1;                                                 \
    for (Py_ssize_t i = 0; i < n; i++) rindex[i] = (IT)(n - rindex[i]);                                \
    for (Py_ssize_t i = 0; i < n; i++)                                                                 \
        for (IT k = ptr[i]; k < ptr[i + 1]; k++)                                                       \
            if (rindex[col[k]] != rindex[i] && !(val && val[k] == 0.0)) closed[rindex[i]] = 0;         \
done:                                                                                                  \
    free(stack); free(calls); free(next); free(root);                                                  \
    return rc;                                                                                         \
}
SCC_KERNEL(int32_t, i32)
SCC_KERNEL(int64_t, i64)

#define ABSMAX_KERNEL(IT, SUF)                                                                         \
static double absmax_##SUF(Py_ssize_t n, const IT *restrict ptr, const double *restrict val)          \
{                                                                                                      \
    double best = 0.0;                                                                                 \
    int nt = threads_for(n);                                                                           \
    (void)nt;                                                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nt) reduction(max:best)")                   \
    for (Py_ssize_t i = 0; i < n; i++) {                                                               \
        if (ptr[i + 1] <= ptr[i]) continue;                                                            \
        double s = fabs(val[ptr[i]]) + pairwise_abs(val + ptr[i] + 1, (Py_ssize_t)(ptr[i + 1] - ptr[i]) - 1); \
        if (s > best) best = s;                                                                        \
    }                                                                                                  \
    return best;                                                                                       \
}
ABSMAX_KERNEL(int32_t, i32)
ABSMAX_KERNEL(int64_t, i64)

/* ---- Python entry points ---------------------------------------------------------------------- */

/* b[0..2] = indptr, indices, data of a CSR matrix; n its rows */
/* indptr's last entry, the entries the rows cover (n >= 0 rows) */
static int64_t csr_last(const Py_buffer *indptr, Py_ssize_t n)
{
    return indptr->itemsize == 4 ? ((const int32_t *)indptr->buf)[n] : ((const int64_t *)indptr->buf)[n];
}

static int csr3_ok(const Py_buffer *b, Py_ssize_t *n)
{
    *n = NELEM(b[0]) - 1;
    return require(b[0].itemsize == b[1].itemsize && *n >= 0 && NELEM(b[1]) >= NELEM(b[2]),
                   "indptr and indices must have one integer type, as many indices as values")
        && require(csr_last(&b[0], *n) >= 0 && csr_last(&b[0], *n) <= NELEM(b[2]),
                   "indptr[-1] beyond the stored entries");
}

static PyObject *py_select(PyObject *self, PyObject *args)
{
    PyObject *o[10];
    Py_buffer b[10];     /* indptr, indices, data, members, diag, pos, out_indptr, out_indices, out_data */
    Py_ssize_t first;
    int neg;
    if (!PyArg_ParseTuple(args, "OOOnOOOOOOp", &o[0], &o[1], &o[2], &first, &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &neg))
        return NULL;
    if (get_some(o, b, "iid-m-d-iI-I-D", (const char *[]){"indptr", "indices", "data", "members", "diag", "pos",
                                                             "out_indptr", "out_indices", "out_data"}) < 0)
        return NULL;
    Py_ssize_t n;
    PyObject *res = NULL;
    int fill = b[7].buf != NULL;
    if (csr3_ok(b, &n)
        && require(!b[3].buf || (NELEM(b[3]) == n && b[5].buf && NELEM(b[5]) >= n),
                   "select: members one entry a row, with pos")
        && require(!b[5].buf || b[5].itemsize == b[6].itemsize, "select: pos and out_indptr of one integer type")
        && require(fill == (b[8].buf != NULL) && (!fill || (b[7].itemsize == b[6].itemsize
                                                            && NELEM(b[7]) == NELEM(b[8]))),
                   "select: out_indices and out_data together, out_indices of out_indptr's type")) {
        Py_ssize_t m = NELEM(b[6]) - 1;
        if (require(m >= 0 && (b[3].buf || m == n) && (!b[4].buf || NELEM(b[4]) >= m),
                    "select: out_indptr one entry a kept row and one, diag one a kept row")) {
            int rc = 0;
            Py_ssize_t total = 0;
            int kin = b[0].itemsize == 4, kout = b[6].itemsize == 4;
            const uint8_t *mem = b[3].buf;
            const double *d = b[4].buf;
            if (fill) {
                /* the out_indptr of the count: its last entry bounds the writes */
                int ok;
                if (kout) ok = ((int32_t *)b[6].buf)[m] <= NELEM(b[7]);
                else ok = ((int64_t *)b[6].buf)[m] <= NELEM(b[7]);
                if (require(ok, "select: out_indices shorter than out_indptr says")) {
                    Py_BEGIN_ALLOW_THREADS
                    if (kin && kout) select_fill_i32_i32(n, b[0].buf, b[1].buf, b[2].buf, first, mem, d, b[5].buf, neg, b[6].buf, b[7].buf, b[8].buf);
                    else if (kin) select_fill_i32_i64(n, b[0].buf, b[1].buf, b[2].buf, first, mem, d, b[5].buf, neg, b[6].buf, b[7].buf, b[8].buf);
                    else if (kout) select_fill_i64_i32(n, b[0].buf, b[1].buf, b[2].buf, first, mem, d, b[5].buf, neg, b[6].buf, b[7].buf, b[8].buf);
                    else select_fill_i64_i64(n, b[0].buf, b[1].buf, b[2].buf, first, mem, d, b[5].buf, neg, b[6].buf, b[7].buf, b[8].buf);
                    Py_END_ALLOW_THREADS
                    res = PyLong_FromSsize_t(0);
                }
            } else {
                Py_BEGIN_ALLOW_THREADS
                if (kout) memset(b[6].buf, 0, (size_t)(m + 1) * 4); else memset(b[6].buf, 0, (size_t)(m + 1) * 8);
                if (kin && kout) rc = select_count_i32_i32(n, b[0].buf, b[1].buf, b[2].buf, first, mem, d, b[5].buf, b[6].buf);
                else if (kin) rc = select_count_i32_i64(n, b[0].buf, b[1].buf, b[2].buf, first, mem, d, b[5].buf, b[6].buf);
                else if (kout) rc = select_count_i64_i32(n, b[0].buf, b[1].buf, b[2].buf, first, mem, d, b[5].buf, b[6].buf);
                else rc = select_count_i64_i64(n, b[0].buf, b[1].buf, b[2].buf, first, mem, d, b[5].buf, b[6].buf);
                if (rc == 0) {                      /* the counts to a row pointer */
                    if (kout) { int32_t *p = b[6].buf; for (Py_ssize_t r = 0; r < m; r++) p[r + 1] += p[r]; total = p[m]; }
                    else { int64_t *p = b[6].buf; for (Py_ssize_t r = 0; r < m; r++) p[r + 1] += p[r]; total = p[m]; }
                }
                Py_END_ALLOW_THREADS
                if (require(rc != -2 && rc != -3, "select: a column index outside the rows"))
                    res = PyLong_FromSsize_t(rc < 0 ? -1 : total);
            }
        }
    }
    release_some(b, 9);
    return res;
}

static PyObject *py_colcount(PyObject *self, PyObject *args)
{
    PyObject *o[4];
    Py_buffer b[4];                                       /* indptr, indices, data, out */
    Py_ssize_t first;
    if (!PyArg_ParseTuple(args, "OOOnO", &o[0], &o[1], &o[2], &first, &o[3])) return NULL;
    if (get_all(o, b, "iidI", (const char *[]){"indptr", "indices", "data", "out"}) < 0) return NULL;
    Py_ssize_t n;
    PyObject *res = NULL;
    if (csr3_ok(b, &n) && require(b[3].itemsize == 8, "colcount: out must be int64")) {
        int64_t *out = b[3].buf;
        Py_ssize_t nc = NELEM(b[3]);
        int rc;
        Py_BEGIN_ALLOW_THREADS
        memset(out, 0, (size_t)nc * 8);
        if (b[0].itemsize == 4) rc = colcount_i32(n, b[0].buf, b[1].buf, b[2].buf, first, out, nc);
        else rc = colcount_i64(n, b[0].buf, b[1].buf, b[2].buf, first, out, nc);
        Py_END_ALLOW_THREADS
        if (require(rc == 0, "colcount: a column index outside out")) { res = Py_None; Py_INCREF(res); }
    }
    release_all(b, 4);
    return res;
}

static PyObject *py_product(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    Py_buffer b[5];                                       /* indptr, indices, data, x, out */
    Py_ssize_t first;
    int offdiag, transpose;
    if (!PyArg_ParseTuple(args, "OOOnppOO", &o[0], &o[1], &o[2], &first, &offdiag, &transpose, &o[3], &o[4]))
        return NULL;
    if (get_all(o, b, "iiddD", (const char *[]){"indptr", "indices", "data", "x", "out"}) < 0) return NULL;
    Py_ssize_t n;
    PyObject *res = NULL;
    if (csr3_ok(b, &n) && require(NELEM(b[transpose ? 3 : 4]) == n && b[3].buf != b[4].buf,
                                  "product: x (or out, transposed) one entry a row, out not x")) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        if (b[0].itemsize == 4) rc = product_i32(n, b[0].buf, b[1].buf, b[2].buf, first, offdiag, transpose, b[3].buf, b[4].buf, NELEM(b[4]));
        else rc = product_i64(n, b[0].buf, b[1].buf, b[2].buf, first, offdiag, transpose, b[3].buf, b[4].buf, NELEM(b[4]));
        Py_END_ALLOW_THREADS
        if (require(rc == 0, "product: a column index outside out")) { res = Py_None; Py_INCREF(res); }
    }
    release_all(b, 5);
    return res;
}

static PyObject *py_reach(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    Py_buffer b[5];                                       /* indptr, indices, data or None, mark, within or None */
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    if (get_some(o, b, "ii-dM-m", (const char *[]){"indptr", "indices", "data", "mark", "within"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1;
    PyObject *res = NULL;
    if (require(n >= 0 && b[0].itemsize == b[1].itemsize && NELEM(b[3]) == n && (!b[4].buf || NELEM(b[4]) == n)
                && (!b[2].buf || NELEM(b[2]) >= NELEM(b[1])),
                "reach: indptr and indices of one type; mark and within one entry a row")) {
        Py_ssize_t got;
        Py_BEGIN_ALLOW_THREADS
        if (b[0].itemsize == 4) got = reach_i32(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf);
        else got = reach_i64(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf);
        Py_END_ALLOW_THREADS
        if (got == -1) PyErr_NoMemory();
        else if (require(got >= 0, "reach: a column index outside the rows")) res = PyLong_FromSsize_t(got);
    }
    release_some(b, 5);
    return res;
}

static PyObject *py_lowcols(PyObject *self, PyObject *args)
{
    PyObject *o[4];
    Py_buffer b[4];                                       /* indptr, indices, data, low */
    int transpose = 0;
    if (!PyArg_ParseTuple(args, "OOOO|p", &o[0], &o[1], &o[2], &o[3], &transpose)) return NULL;
    if (get_all(o, b, "iidI", (const char *[]){"indptr", "indices", "data", "low"}) < 0) return NULL;
    Py_ssize_t n;
    PyObject *res = NULL;
    if (csr3_ok(b, &n) && require(b[3].itemsize == 8 && NELEM(b[3]) == n, "lowcols: low int64, one entry a row")) {
        int bad = 0;
        if (transpose)                              /* a column outside low: checked before the scatter */
            for (Py_ssize_t k = 0; k < NELEM(b[2]); k++) {
                Py_ssize_t j = b[1].itemsize == 4 ? ((int32_t *)b[1].buf)[k] : ((int64_t *)b[1].buf)[k];
                if (j < 0 || j >= n) { bad = 1; break; }
            }
        if (require(!bad, "lowcols: a column index outside the rows")) {
            Py_BEGIN_ALLOW_THREADS
            if (b[0].itemsize == 4) lowcols_i32(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, transpose);
            else lowcols_i64(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, transpose);
            Py_END_ALLOW_THREADS
            res = Py_None; Py_INCREF(res);
        }
    }
    release_all(b, 4);
    return res;
}

static PyObject *py_scc(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    Py_buffer b[5];                                       /* indptr, indices, data or None, label, closed */
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    if (get_some(o, b, "ii-dIM", (const char *[]){"indptr", "indices", "data", "label", "closed"}) < 0)
        return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1;
    PyObject *res = NULL;
    if (require(n >= 0 && b[0].itemsize == b[1].itemsize && b[3].itemsize == b[0].itemsize && NELEM(b[3]) == n
                && NELEM(b[4]) == n && (!b[2].buf || NELEM(b[2]) >= NELEM(b[1])),
                "scc: indptr, indices and label of one type; label and closed one entry a row")
            && require(csr_last(&b[0], n) >= 0 && csr_last(&b[0], n) <= NELEM(b[1]),
                       "scc: indptr[-1] beyond the stored entries")) {
        Py_ssize_t got;
        Py_BEGIN_ALLOW_THREADS
        memset(b[4].buf, 0, (size_t)n);
        if (b[0].itemsize == 4) got = scc_i32(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf);
        else got = scc_i64(n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf);
        Py_END_ALLOW_THREADS
        if (got == -1) PyErr_NoMemory();
        else if (require(got >= 0, "scc: a column index outside the rows")) res = PyLong_FromSsize_t(got);
    }
    release_some(b, 5);
    return res;
}

static PyObject *py_absmax(PyObject *self, PyObject *args)
{
    PyObject *o[2];
    Py_buffer b[2];                                       /* indptr, data */
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1])) return NULL;
    if (get_all(o, b, "id", (const char *[]){"indptr", "data"}) < 0) return NULL;
    Py_ssize_t n = NELEM(b[0]) - 1;
    PyObject *res = NULL;
    int ok = n >= 0;
    if (ok) {                                             /* a row pointer within the values */
        if (b[0].itemsize == 4) { const int32_t *p = b[0].buf; ok = p[0] >= 0 && p[n] <= NELEM(b[1]); }
        else { const int64_t *p = b[0].buf; ok = p[0] >= 0 && p[n] <= NELEM(b[1]); }
    }
    if (require(ok, "absmax: indptr must point within data")) {
        double m;
        Py_BEGIN_ALLOW_THREADS
        m = b[0].itemsize == 4 ? absmax_i32(n, b[0].buf, b[1].buf) : absmax_i64(n, b[0].buf, b[1].buf);
        Py_END_ALLOW_THREADS
        res = PyFloat_FromDouble(m);
    }
    release_all(b, 2);
    return res;
}

static PyObject *py_walk(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    Py_buffer b[6];                                       /* indptr, indices, data, q, u, path */
    Py_ssize_t first, s;
    if (!PyArg_ParseTuple(args, "OOOnOnOO", &o[0], &o[1], &o[2], &first, &o[3], &s, &o[4], &o[5])) return NULL;
    if (get_all(o, b, "iidddI", (const char *[]){"indptr", "indices", "data", "q", "u", "path"}) < 0) return NULL;
    Py_ssize_t n;
    PyObject *res = NULL;
    if (csr3_ok(b, &n) && require(NELEM(b[3]) == n && 0 <= s && s < n && b[5].itemsize == 8
                                  && NELEM(b[5]) >= NELEM(b[4]),
                                  "walk: q one entry a row, 0 <= s < rows, path int64 as long as u")) {
        Py_ssize_t got;
        Py_BEGIN_ALLOW_THREADS
        if (b[0].itemsize == 4) got = walk_i32(n, b[0].buf, b[1].buf, b[2].buf, first, b[3].buf, s, b[4].buf, NELEM(b[4]), b[5].buf);
        else got = walk_i64(n, b[0].buf, b[1].buf, b[2].buf, first, b[3].buf, s, b[4].buf, NELEM(b[4]), b[5].buf);
        Py_END_ALLOW_THREADS
        if (got == -1) PyErr_NoMemory();
        else if (require(got >= 0, "walk: a jump outside the owned rows (one process only)")) res = PyLong_FromSsize_t(got);
    }
    release_all(b, 6);
    return res;
}
