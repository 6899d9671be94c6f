/*
 * Compiled breadth-first exploration of a ctmc.Model (the module ctmc._explore).
 *
 * The model's guards, rates and updates arrive compiled by ctmc._compiled into
 * a small stack bytecode over doubles (integers are exact in a double up to
 * 2^53; every integer operation checks that bound).  One call explores the
 * reachable states from the initial codes in breadth-first order and returns
 * the generator in the numbering of Model.build: states sorted by code, CSR
 * rows with sorted columns, duplicates summed, the diagonal minus the row sum.
 *
 * This engine only ever answers for the happy path.  Whatever the vectorised
 * builder would report or treat specially (an invalid rate, an update out of
 * bounds or not an integer, an integer division by zero, a value beyond
 * 2^53, more states than asked or than memory allows) stops it with a status,
 * and ctmc.model takes over with its own rules and messages: a rule lives in
 * one place.
 *
 * One translation unit in five files: _explore_vm.h (the opcodes and the stack interpreter),
 * _explore_store.h (growable arrays, the code index, the sorts), _explore_events.h (the events
 * as the engine reads them, event masks, the expansion of one state), _explore_sim.h (stochastic simulation on the same expansion)
 * and this file (the buffers the entry points take, the breadth-first exploration, the rows of given
 * states, the module).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_explore_vm.h"
#include "_explore_store.h"
#include "_explore_events.h"


static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != itemsize && !(view->len % itemsize == 0 && view->itemsize == 1)) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes", what, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* ---- the model as the entry points take it ---------------------------------------- */
#define N_MODEL_ARGS 6
typedef struct {
    Py_buffer buf[N_MODEL_ARGS];
    int have, nv;
    model_t M;
    event_t *evs;
    atom_t *atoms;
    range_t *ranges;
    upd_t *ups;
    /* one state's transitions */
    int64_t *c1s;
    double *rs, *newvs;
    int *evi;
} engine_t;

static void engine_close(engine_t *g)
{
    while (g->have > 0) PyBuffer_Release(&g->buf[--g->have]);
    masks_free(&g->M.mk);
    free(g->evs);
    free(g->atoms);
    free(g->ranges);
    free(g->ups);
    free(g->c1s);
    free(g->rs);
    free(g->newvs);
    free(g->evi);
}

/* the model from (code, consts, events, lo, span, strides): 0, ST_FALLBACK, or -1 with an exception */
static int engine_open(engine_t *g, PyObject **obj)
{
    static const char *names[N_MODEL_ARGS] = {"code", "consts", "events", "lo", "span", "strides"};
    static const Py_ssize_t itemsize[N_MODEL_ARGS] = {4, 8, 4, 8, 8, 8};
    model_t *M = &g->M;
    int n_ev = 0, rc;
    memset(g, 0, sizeof(*g));
    for (; g->have < N_MODEL_ARGS; g->have++)
        if (get_buffer(obj[g->have], &g->buf[g->have], itemsize[g->have], names[g->have]) < 0) return -1;
    M->code = g->buf[0].buf;
    M->consts = g->buf[1].buf;
    M->lo = g->buf[3].buf;
    M->span = g->buf[4].buf;
    M->strides = g->buf[5].buf;
    g->nv = (int)(g->buf[3].len / 8);
    if (g->nv > MAX_VARS || g->buf[4].len != g->buf[3].len || g->buf[5].len != g->buf[3].len) return ST_FALLBACK;
    rc = parse_events(g->buf[2].buf, g->buf[2].len / 4, M->consts, g->buf[1].len / 8, M->lo, M->span, g->nv,
                      &g->evs, &n_ev, &g->atoms, &g->ranges, &g->ups);
    if (rc == -2) { PyErr_NoMemory(); return -1; }
    if (rc < 0) { PyErr_SetString(PyExc_ValueError, "events: malformed"); return -1; }
    if (n_ev > MAX_EVENTS) return ST_FALLBACK;
    if (masks_build(&M->mk, g->evs, n_ev, g->ranges, M->lo, M->span, g->nv) < 0) { PyErr_NoMemory(); return -1; }
    M->evs = g->evs;
    M->n_ev = n_ev;
    for (int e = 0; e < n_ev; e++) if (g->evs[e].nu > M->max_nu) M->max_nu = g->evs[e].nu;
    if (M->max_nu == 0) M->max_nu = 1;
    g->c1s = malloc((n_ev + 1) * sizeof(int64_t));
    g->rs = malloc((n_ev + 1) * sizeof(double));
    g->evi = malloc((n_ev + 1) * sizeof(int));
    g->newvs = malloc((size_t)(n_ev + 1) * M->max_nu * sizeof(double));
    if (!g->c1s || !g->rs || !g->evi || !g->newvs) { PyErr_NoMemory(); return -1; }
    return 0;
}

/* state `c0`'s variables, decoded (mixed radix, the last variable least significant) */
static inline void decode(const engine_t *g, int64_t c0, double *vals, int32_t *ivals)
{
    for (int v = g->nv - 1; v >= 0; v--) {
        int64_t q = c0 / g->M.span[v];
        ivals[v] = (int32_t)(c0 - q * g->M.span[v] + g->M.lo[v]);
        vals[v] = ivals[v];
        c0 = q;
    }
}

#include "_explore_sim.h"     /* the simulator: uses engine_t and decode */

/*
 * explore(code, consts, events, lo, span, strides, box, init, dense, max_states, max_bytes, progress,
 *         codes_only)
 *
 * code    int32: the programs, each ended by OP_END
 * consts  float64: the constants they read
 * events  int32: the events (layout above parse_events)
 * lo, span, strides  int64 per variable; box = product of spans
 * init    int64 codes of the initial states
 * dense   the box may be indexed by one int32 slot a point: states are then indexed by a hash
 *         table until they are 1/64 of the box, then by the table, and the rows are made in a
 *         second pass in code order (nothing kept from the search); else a hash table, and the
 *         search keeps the transitions, permuted into code order at the end
 * max_states, max_bytes  limits (-1: none): a build beyond them stops (ST_MAX_STATES, ST_MEMORY)
 * progress  callable(n_found) called now and then, or None
 * codes_only  find the states only
 *
 * Returns (status, n_states, n_transitions, bytes, arrays): bytes is the memory the engine holds
 * (at the stop, or the most it held); arrays are bytearrays when status is ST_OK, (codes,) with
 * codes_only, else (codes, indptr, indices, data) (int64 codes sorted, int32 indptr and indices,
 * float64 data); None otherwise.
 */
static PyObject *explore(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *obj[N_MODEL_ARGS], *o_init, *progress;
    long long box, max_states, max_bytes;
    int dense, codes_only, status;
    Py_buffer b_init;
    engine_t g;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOLOpLLOp", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &obj[5],
                          &box, &o_init, &dense, &max_states, &max_bytes, &progress, &codes_only))
        return NULL;
    if (get_buffer(o_init, &b_init, 8, "init") < 0) return NULL;
    status = engine_open(&g, obj);
    if (status < 0) goto release;

    {
    const model_t *M = &g.M;
    const int64_t *init = b_init.buf;
    const int nv = g.nv, n_ev = M->n_ev;
    const int keep = !dense && !codes_only;     /* transitions kept (permuted at the end) */
    const int64_t table_at = box <= 65536 ? 0 : box / 64;   /* states from which a table indexes them */
    Py_ssize_t n_init = b_init.len / 8;
    size_t bytes = 0, n = 0, ntrans = 0, i;
    vec vcodes = {NULL, 0, 0, 8}, vvals = {NULL, 0, 0, 4}, vptr = {NULL, 0, 0, 8};
    vec vcol = {NULL, 0, 0, 4}, vrate = {NULL, 0, 0, 8};
    index_t ix = {0};
    double vals[MAX_VARS];
    int32_t ivals[MAX_VARS];
    int64_t *c1s = g.c1s;
    double *rs = g.rs, *newvs = g.newvs;
    int *evi = g.evi;
    PyObject *o_codes = NULL, *o_indptr = NULL, *o_indices = NULL, *o_data = NULL;
    int32_t *rank = NULL, *order = NULL;        /* the code order of a hashed search's states */

    if (status != ST_OK) goto done;
    if (index_init(&ix, dense && table_at == 0, box, &bytes) < 0) { status = ST_MEMORY; goto done; }
    /* the initial states */
    if (vec_reserve(&vcodes, n_init, &bytes) || vec_reserve(&vvals, n_init * nv, &bytes)
        || vec_reserve(&vptr, 1, &bytes)) { status = ST_MEMORY; goto done; }
    ((int64_t *)vptr.p)[0] = 0;
    for (Py_ssize_t k = 0; k < n_init; k++) {
        int isnew;
        int64_t c = init[k];
        if (c < 0 || c >= box) { status = ST_FALLBACK; goto done; }
        if (index_get(&ix, c, (int32_t)n, &isnew, &bytes) == -2) { status = ST_MEMORY; goto done; }
        if (!isnew) continue;
        ((int64_t *)vcodes.p)[n] = c;
        decode(&g, c, vals, (int32_t *)vvals.p + n * nv);
        n++;
    }
    if (max_states >= 0 && (long long)n > max_states) { status = ST_MAX_STATES; goto done; }
    /*
     * Breadth first: states are expanded in discovery order. With a dense index the search only
     * finds the states (pass 1) and the rows are made afterwards in code order (pass 2: every
     * state expanded again, its targets' numbers one read of the table away); with a hashed index
     * the transitions are kept and permuted into code order.
     */
    for (i = 0; i < n; i++) {
        const int32_t *sv;
        int64_t c0 = ((int64_t *)vcodes.p)[i];
        int nt, st;
        /* room for every event's transition and new state (the storage does not move below) */
        if (vec_reserve(&vcodes, n + n_ev, &bytes) || vec_reserve(&vvals, (n + n_ev) * nv, &bytes)
            || (keep && (vec_reserve(&vcol, ntrans + n_ev, &bytes) || vec_reserve(&vrate, ntrans + n_ev, &bytes)
                         || vec_reserve(&vptr, i + 2, &bytes)))) {
            status = ST_MEMORY;
            goto done;
        }
        sv = (int32_t *)vvals.p + i * nv;
        for (int v = 0; v < nv; v++) vals[v] = sv[v];
        st = expand(M, vals, sv, c0, c1s, rs, evi, newvs, &nt);
        if (st != ST_OK) { status = st; goto done; }
        for (int t = 0; t < nt; t++)
            if (c1s[t] >= 0 && c1s[t] < box) index_prefetch(&ix, c1s[t]);
        for (int t = 0; t < nt; t++) {
            int isnew;
            int64_t j;
            if (c1s[t] < 0 || c1s[t] >= box) { status = ST_FALLBACK; goto done; }   /* cannot happen */
            j = index_get(&ix, c1s[t], (int32_t)n, &isnew, &bytes);
            if (j == -2) { status = ST_MEMORY; goto done; }
            if (isnew) {
                const event_t *E = M->evs + evi[t];
                const double *newv = newvs + (size_t)t * M->max_nu;
                int32_t *nvp;
                if (max_states >= 0 && (long long)n + 1 > max_states) { status = ST_MAX_STATES; goto done; }
                if (n + 1 >= INT32_MAX) { status = ST_FALLBACK; goto done; }
                ((int64_t *)vcodes.p)[n] = c1s[t];
                nvp = (int32_t *)vvals.p + n * nv;
                memcpy(nvp, sv, nv * sizeof(int32_t));
                for (int u = 0; u < E->nu; u++) nvp[E->ups[u].var] = (int32_t)newv[u];
                n++;
            }
            if (keep) {
                ((int32_t *)vcol.p)[ntrans] = (int32_t)j;
                ((double *)vrate.p)[ntrans] = rs[t];
            }
            ntrans++;
        }
        if (keep) ((int64_t *)vptr.p)[i + 1] = (int64_t)ntrans;
        if (dense && !ix.table && (int64_t)n >= table_at && index_to_table(&ix, box, &bytes) < 0) {
            status = ST_MEMORY;
            goto done;
        }
        if (max_bytes >= 0 && bytes > (size_t)max_bytes) { status = ST_MEMORY; goto done; }
        if ((i & 0xffff) == 0xffff) {
            if (PyErr_CheckSignals() < 0) goto fail;
            if (progress != Py_None) {
                PyObject *res = PyObject_CallFunction(progress, "n", (Py_ssize_t)n);
                if (!res) goto fail;
                Py_DECREF(res);
            }
        }
    }
    free(vvals.p);
    vvals.p = NULL;
    if (!codes_only && ntrans + n >= INT32_MAX) { status = ST_FALLBACK; goto done; }
    /* what the result adds: the codes, and the generator (CSR) */
    bytes += n * 8 + (codes_only ? 0 : (n + 1) * 4 + (ntrans + n) * 12 + (ix.table ? 0 : n * 8));
    if (max_bytes >= 0 && bytes > (size_t)max_bytes) { status = ST_MEMORY; goto done; }
    {
        size_t nnz = 0, cap = codes_only ? 0 : ntrans + n;
        int64_t *cs;
        o_codes = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
        if (!o_codes) goto fail;
        cs = (int64_t *)PyByteArray_AS_STRING(o_codes);
        /* the code order */
        if (ix.table) {
            size_t r = 0;
            for (int64_t c = 0; c < box; c++)
                if (ix.table[c] >= 0) { ix.table[c] = (int32_t)r; cs[r] = c; r++; }   /* renumbered */
        } else if (dense) {
            /* few states in a large box, still hashed: sorted, and the index renumbered */
            int bits = 0;
            int32_t *tmp = malloc(n * sizeof(int32_t));
            if (!tmp) { status = ST_MEMORY; goto done; }
            while (bits < 63 && ((int64_t)1 << bits) < box) bits++;
            memcpy(cs, vcodes.p, n * sizeof(int64_t));
            if (radix_sort(cs, tmp, n, bits) < 0) { free(tmp); status = ST_MEMORY; goto done; }
            free(tmp);
            for (i = 0; i < n; i++) index_set(&ix, cs[i], (int32_t)i);
        } else {
            int bits = 0;
            rank = malloc(n * sizeof(int32_t));
            order = malloc(n * sizeof(int32_t));
            if (!rank || !order) { status = ST_MEMORY; goto done; }
            while (bits < 63 && ((int64_t)1 << bits) < box) bits++;
            memcpy(cs, vcodes.p, n * sizeof(int64_t));
            for (i = 0; i < n; i++) order[i] = (int32_t)i;
            if (radix_sort(cs, order, n, bits) < 0) { status = ST_MEMORY; goto done; }
            for (i = 0; i < n; i++) rank[order[i]] = (int32_t)i;
            /* the rows are found by rank from here: the hashed index and the discovery order are
             * freed before the generator is made beside the kept transitions (kanban t=4: 4.7
             * bytes a transition less at the build's peak) */
            free(ix.slots);
            ix.slots = NULL;
            free(vcodes.p);
            vcodes.p = NULL;
        }
        if (!codes_only) {
            int32_t *ip, *col;
            double *dat;
            o_indptr = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((n + 1) * 4));
            o_indices = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(cap * 4 + 4));
            o_data = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(cap * 8 + 8));
            if (!o_indptr || !o_indices || !o_data) goto fail;
            ip = (int32_t *)PyByteArray_AS_STRING(o_indptr);
            col = (int32_t *)PyByteArray_AS_STRING(o_indices);
            dat = (double *)PyByteArray_AS_STRING(o_data);
            ip[0] = 0;
            for (size_t r = 0; r < n; r++) {
                size_t start = nnz;
                if (dense) {
                    /* pass 2 */
                    int nt, st;
                    decode(&g, cs[r], vals, ivals);
                    st = expand(M, vals, ivals, cs[r], c1s, rs, evi, newvs, &nt);
                    if (st != ST_OK) { status = st; goto done; }
                    for (int t = 0; t < nt; t++) {
                        col[nnz] = (int32_t)index_find(&ix, c1s[t]);
                        dat[nnz] = rs[t];
                        nnz++;
                    }
                } else {
                    /* the kept row, permuted (the rows a few ahead asked for: they are scattered) */
                    int32_t d = order[r];
                    const int64_t *ptr = vptr.p;
                    if (r + 16 < n) __builtin_prefetch(ptr + order[r + 16]);
                    if (r + 8 < n) {
                        int64_t a8 = ptr[order[r + 8]];
                        __builtin_prefetch((int32_t *)vcol.p + a8);
                        __builtin_prefetch((double *)vrate.p + a8);
                    }
                    for (int64_t k = ptr[d]; k < ptr[d + 1]; k++) {
                        col[nnz] = rank[((int32_t *)vcol.p)[k]];
                        dat[nnz] = ((double *)vrate.p)[k];
                        nnz++;
                    }
                }
                nnz = finish_row(col, dat, start, nnz, (int32_t)r);
                if (nnz == SIZE_MAX) { status = ST_MEMORY; goto done; }
                ip[r + 1] = (int32_t)nnz;
                if ((r & 0xffff) == 0xffff && PyErr_CheckSignals() < 0) goto fail;
            }
        }
        if (!codes_only && (PyByteArray_Resize(o_indices, (Py_ssize_t)(nnz * 4)) < 0
                            || PyByteArray_Resize(o_data, (Py_ssize_t)(nnz * 8)) < 0))
            goto fail;
    }
done:
    if (status == ST_OK && codes_only)
        result = Py_BuildValue("innn(N)", status, (Py_ssize_t)n, (Py_ssize_t)ntrans, (Py_ssize_t)bytes, o_codes);
    else if (status == ST_OK)
        result = Py_BuildValue("innn(NNNN)", status, (Py_ssize_t)n, (Py_ssize_t)ntrans, (Py_ssize_t)bytes,
                               o_codes, o_indptr, o_indices, o_data);
    else
        result = Py_BuildValue("innnO", status, (Py_ssize_t)n, (Py_ssize_t)ntrans, (Py_ssize_t)bytes, Py_None);
    if (status == ST_OK) o_codes = o_indptr = o_indices = o_data = NULL;   /* owned by the result */
fail:
    Py_XDECREF(o_codes);
    Py_XDECREF(o_indptr);
    Py_XDECREF(o_indices);
    Py_XDECREF(o_data);
    free(rank);
    free(order);
    free(vcodes.p);
    free(vvals.p);
    free(vptr.p);
    free(vcol.p);
    free(vrate.p);
    free(ix.table);
    free(ix.slots);
    }
release:
    engine_close(&g);
    PyBuffer_Release(&b_init);
    return result;
}

/*
 * rows(code, consts, events, lo, span, strides, box, codes, start, stop, dense)
 *
 * Rows start:stop of the generator over the states `codes` (int64, sorted: the numbering of
 * explore), each state expanded as by explore's second pass, targets numbered through an index
 * of `codes` (a table over the box if dense, else a hash table). Returns (status, (indptr, indices, data)) as
 * bytearrays, or (status, None): ST_FALLBACK also when a target is not among `codes`.
 */
static PyObject *rows(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *obj[N_MODEL_ARGS], *o_codes;
    long long box;
    Py_ssize_t start, stop;
    int dense, status;
    Py_buffer b_codes;
    engine_t g;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOLOnnp", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &obj[5],
                          &box, &o_codes, &start, &stop, &dense))
        return NULL;
    if (get_buffer(o_codes, &b_codes, 8, "codes") < 0) return NULL;
    status = engine_open(&g, obj);
    if (status < 0) goto release;

    {
    const int64_t *codes = b_codes.buf;
    Py_ssize_t n = b_codes.len / 8;
    index_t ix = {0};
    size_t nnz = 0, cap = 0, bytes = 0;
    int32_t *ip = NULL, *col = NULL;
    double *dat = NULL, vals[MAX_VARS];
    int32_t ivals[MAX_VARS];
    PyObject *o_indptr = NULL, *o_indices = NULL, *o_data = NULL;
    if (status != ST_OK) goto done;
    if (start < 0 || stop < start || stop > n || n >= INT32_MAX) { status = ST_FALLBACK; goto done; }
    if (index_init(&ix, dense, box, &bytes) < 0) { status = ST_MEMORY; goto done; }
    for (Py_ssize_t k = 0; k < n; k++) {
        int isnew;
        if (codes[k] < 0 || codes[k] >= box) { status = ST_FALLBACK; goto done; }
        if (index_get(&ix, codes[k], (int32_t)k, &isnew, &bytes) == -2) { status = ST_MEMORY; goto done; }
    }
    cap = 1024;
    o_indptr = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((stop - start + 1) * 4));
    o_indices = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(cap * 4));
    o_data = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(cap * 8));
    if (!o_indptr || !o_indices || !o_data) goto fail;
    ip = (int32_t *)PyByteArray_AS_STRING(o_indptr);
    ip[0] = 0;
    for (Py_ssize_t r = start; r < stop; r++) {
        int nt, st;
        size_t row0 = nnz;
        decode(&g, codes[r], vals, ivals);
        st = expand(&g.M, vals, ivals, codes[r], g.c1s, g.rs, g.evi, g.newvs, &nt);
        if (st != ST_OK) { status = st; goto done; }
        if (nnz + nt + 1 > cap) {
            while (nnz + nt + 1 > cap) cap *= 2;
            if (cap >= INT32_MAX) { status = ST_FALLBACK; goto done; }
            if (PyByteArray_Resize(o_indices, (Py_ssize_t)(cap * 4)) < 0
                || PyByteArray_Resize(o_data, (Py_ssize_t)(cap * 8)) < 0)
                goto fail;
        }
        col = (int32_t *)PyByteArray_AS_STRING(o_indices);
        dat = (double *)PyByteArray_AS_STRING(o_data);
        for (int t = 0; t < nt; t++) {
            int64_t j = index_find(&ix, g.c1s[t]);
            if (j < 0) { status = ST_FALLBACK; goto done; }   /* not among the states given */
            col[nnz] = (int32_t)j;
            dat[nnz] = g.rs[t];
            nnz++;
        }
        nnz = finish_row(col, dat, row0, nnz, (int32_t)r);
        if (nnz == SIZE_MAX) { status = ST_MEMORY; goto done; }
        ip[r - start + 1] = (int32_t)nnz;
        if (((r - start) & 0xffff) == 0xffff && PyErr_CheckSignals() < 0) goto fail;
    }
    if (PyByteArray_Resize(o_indices, (Py_ssize_t)(nnz * 4)) < 0
        || PyByteArray_Resize(o_data, (Py_ssize_t)(nnz * 8)) < 0)
        goto fail;
done:
    if (status == ST_OK) {
        result = Py_BuildValue("i(NNN)", status, o_indptr, o_indices, o_data);
        o_indptr = o_indices = o_data = NULL;
    } else {
        result = Py_BuildValue("iO", status, Py_None);
    }
fail:
    Py_XDECREF(o_indptr);
    Py_XDECREF(o_indices);
    Py_XDECREF(o_data);
    free(ix.table);
    free(ix.slots);
    }
release:
    engine_close(&g);
    PyBuffer_Release(&b_codes);
    return result;
}

static PyMethodDef methods[] = {
    {"explore", explore, METH_VARARGS, "Compiled breadth-first exploration (see ctmc/_compiled.py)."},
    {"rows", rows, METH_VARARGS, "Rows of the generator over given states (see ctmc/_compiled.py)."},
    SIM_METHODS
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_explore", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__explore(void)
{
    PyObject *m = PyModule_Create(&module), *ops;
    if (!m) return NULL;
    ops = PyTuple_New(N_OPS);
    if (!ops) goto bad;
    for (int k = 0; k < N_OPS; k++) {
        PyObject *name = PyUnicode_FromString(op_names[k]);
        if (!name) { Py_DECREF(ops); goto bad; }
        PyTuple_SET_ITEM(ops, k, name);
    }
    if (PyModule_AddObject(m, "OPS", ops) < 0) { Py_DECREF(ops); goto bad; }
    if (PyModule_AddIntConstant(m, "STACK", STACK) < 0 || PyModule_AddIntConstant(m, "MAX_VARS", MAX_VARS) < 0
        || PyModule_AddIntConstant(m, "MAX_EVENTS", MAX_EVENTS) < 0
        || PyModule_AddIntConstant(m, "ATOM_VV", ATOM_VV) < 0 || PyModule_AddIntConstant(m, "ST_MEMORY", ST_MEMORY) < 0)
        goto bad;
    return m;
bad:
    Py_DECREF(m);
    return NULL;
}
