/*
 * Events of ctmc._explore: the compiled events as the engine reads them (guard ranges and
 * programs, rates, updates), the per-variable event masks, and the expansion of one state into
 * its transitions and finished CSR row.
 * Included once, by _explore.c (one translation unit).
 */
#ifndef CTMC_EXPLORE_EVENTS_H
#define CTMC_EXPLORE_EVENTS_H

/* ---- events ------------------------------------------------------------------
 * The events array holds, per event (int32 words):
 *   n_atoms, (var, cmp, arg) * n_atoms        guard conjuncts "variable <cmp> consts[arg]", or with
 *                                              cmp + ATOM_VV, "variable <cmp> variable arg"
 *   n_progs, program * n_progs                 the other conjuncts of the guard
 *   rate_const, rate_program                   rate_const >= 0: a constant rate (no program)
 *   n_updates, (var, mode, arg) * n_updates    mode 0: arg is a program; 1: var += consts[arg]
 *                                              (an integer); 2: var = consts[arg] (an integer)
 */
#define ATOM_VV 64
typedef struct { int var, op, var2; double c; } atom_t;
typedef struct { int var, mode; int32_t prog; double k; } upd_t;
/* a conjunct "lo <= variable <= lo + width" (a comparison with a constant, intersected with the bounds) */
typedef struct { int var; int64_t lo; uint64_t width; } range_t;
typedef struct {
    int na, ng, nu, nr, never;
    const range_t *ranges;
    const atom_t *atoms;
    const int32_t *gprogs;
    double rate;             /* a constant rate, or -1 */
    int32_t rate_prog;
    const upd_t *ups;
} event_t;

static inline int atom_holds(const atom_t *a, const double *vals)
{
    double x = vals[a->var], c = a->var2 >= 0 ? vals[a->var2] : a->c;
    switch (a->op) {
    case OP_LT: return x < c;
    case OP_LE: return x <= c;
    case OP_GT: return x > c;
    case OP_GE: return x >= c;
    case OP_EQ: return x == c;
    default: return x != c;
    }
}

/* "x <op> c" for an integer x in [lo, hi] as lo' <= x <= hi'; 0 if it never holds */
static int atom_range(int op, double c, double lo, double hi, int64_t *a, int64_t *b)
{
    double A = lo, B = hi;
    if (c != c) return 0;                               /* NaN: no comparison holds */
    switch (op) {
    case OP_LT: B = fmin(B, ceil(c) - 1); break;
    case OP_LE: B = fmin(B, floor(c)); break;
    case OP_GT: A = fmax(A, floor(c) + 1); break;
    case OP_GE: A = fmax(A, ceil(c)); break;
    default:                                            /* OP_EQ */
        if (c != floor(c)) return 0;
        A = fmax(A, c);
        B = fmin(B, c);
    }
    if (A > B) return 0;
    *a = (int64_t)A;
    *b = (int64_t)B;
    return 1;
}

/* parse the events array; -1 on a malformed one. Conjuncts comparing a variable with a constant
   (but !=) become ranges, tested without a branch each. */
static int parse_events(const int32_t *w, Py_ssize_t nw, const double *consts, Py_ssize_t nc,
                        const int64_t *vlo, const int64_t *vspan, int nv,
                        event_t **out_ev, int *out_n, atom_t **out_atoms, range_t **out_ranges, upd_t **out_ups)
{
    Py_ssize_t k = 0;
    int n = 0, na = 0, nu = 0;
    /* first pass: counts */
    while (k < nw) {
        int a = w[k], g, u;
        na += a;
        k += 1 + 3 * a;
        if (k >= nw) return -1;
        g = w[k];
        k += 1 + g + 2;
        if (k >= nw) return -1;
        u = w[k];
        nu += u;
        k += 1 + 3 * u;
        n++;
    }
    if (k != nw) return -1;
    event_t *ev = calloc(n ? n : 1, sizeof(event_t));
    atom_t *atoms = calloc(na ? na : 1, sizeof(atom_t));
    range_t *ranges = calloc(na ? na : 1, sizeof(range_t));
    upd_t *ups = calloc(nu ? nu : 1, sizeof(upd_t));
    int nr = 0;
    if (!ev || !atoms || !ranges || !ups) { free(ev); free(atoms); free(ranges); free(ups); return -2; }
    k = 0;
    na = nu = 0;
    for (int e = 0; e < n; e++) {
        event_t *E = ev + e;
        int m = w[k++];
        E->atoms = atoms + na;
        E->ranges = ranges + nr;
        for (int i = 0; i < m; i++, k += 3) {
            int var = w[k];
            if (var < 0 || var >= nv) goto bad;
            if (w[k + 1] >= ATOM_VV) {
                if (w[k + 2] < 0 || w[k + 2] >= nv) goto bad;
                atoms[na].var = var;
                atoms[na].op = w[k + 1] - ATOM_VV;
                atoms[na].var2 = w[k + 2];
                atoms[na].c = 0.0;
                na++;
                E->na++;
                continue;
            }
            if (w[k + 2] < 0 || w[k + 2] >= nc) goto bad;
            if (w[k + 1] == OP_NE) {
                atoms[na].var = var;
                atoms[na].op = OP_NE;
                atoms[na].var2 = -1;
                atoms[na].c = consts[w[k + 2]];
                na++;
                E->na++;
                continue;
            }
            {
                int64_t a, b;
                if (!atom_range(w[k + 1], consts[w[k + 2]], (double)vlo[var], (double)(vlo[var] + vspan[var] - 1),
                                &a, &b)) {
                    E->never = 1;
                    continue;
                }
                ranges[nr].var = var;
                ranges[nr].lo = a;
                ranges[nr].width = (uint64_t)(b - a);
                nr++;
                E->nr++;
            }
        }
        E->ng = w[k++];
        E->gprogs = w + k;
        k += E->ng;
        E->rate = w[k] >= 0 && w[k] < nc ? consts[w[k]] : -1.0;
        E->rate_prog = w[k + 1];
        k += 2;
        E->nu = w[k++];
        E->ups = ups + nu;
        for (int i = 0; i < E->nu; i++, nu++) {
            ups[nu].var = w[k];
            ups[nu].mode = w[k + 1];
            ups[nu].prog = w[k + 2];
            if (ups[nu].mode) {
                if (w[k + 2] < 0 || w[k + 2] >= nc) goto bad;
                ups[nu].k = consts[w[k + 2]];
            }
            k += 3;
        }
    }
    *out_ev = ev;
    *out_n = n;
    *out_atoms = atoms;
    *out_ranges = ranges;
    *out_ups = ups;
    return 0;
bad:
    free(ev);
    free(atoms);
    free(ranges);
    free(ups);
    return -1;
}

/* numpy's pairwise summation (the inner loop of np.add.reduce on float64) */
static double pairwise_sum(const double *a, size_t n)
{
    if (n < 8) {
        double res = 0.;
        for (size_t i = 0; i < n; i++) res += a[i];
        return res;
    } else if (n <= 128) {
        double r[8], res;
        size_t i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    } else {
        size_t n2 = n / 2;
        n2 -= n2 % 8;
        return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
    }
}

/* ---- one state ------------------------------------------------------------------ */
/*
 * Which events a state may enable, by table: for a variable of a small span that some ranges
 * test, one bit mask over the events per value (the events whose ranges on it admit the value);
 * a state's candidates are the AND of its variables' masks. Those ranges are then not tested
 * again, one by one.
 */
#define MASK_SPAN 4096
typedef struct {
    int words;              /* 64-bit words a mask */
    uint64_t *alive;        /* the events that can fire at all */
    int n_idx;              /* variables with a table */
    int *idx_var;
    uint64_t *tab;          /* per indexed variable, span x words */
    size_t *tab_at;
} masks_t;

typedef struct {
    const event_t *evs;
    int n_ev, max_nu;
    const int32_t *code;
    const double *consts;
    const int64_t *lo, *span, *strides;
    masks_t mk;
} model_t;

static void masks_free(masks_t *mk)
{
    free(mk->alive);
    free(mk->idx_var);
    free(mk->tab);
    free(mk->tab_at);
}

/* the tables of the variables of span <= MASK_SPAN; their ranges leave the events (ranges reordered) */
static int masks_build(masks_t *mk, event_t *evs, int n_ev, range_t *ranges, const int64_t *vlo,
                       const int64_t *vspan, int nv)
{
    int words = (n_ev + 63) / 64 > 0 ? (n_ev + 63) / 64 : 1;
    char *tested = calloc(nv, 1);
    size_t total = 0;
    mk->words = words;
    mk->alive = calloc(words, sizeof(uint64_t));
    mk->idx_var = malloc(sizeof(int) * (nv ? nv : 1));
    mk->tab_at = malloc(sizeof(size_t) * (nv ? nv : 1));
    if (!tested || !mk->alive || !mk->idx_var || !mk->tab_at) { free(tested); return -1; }
    for (int e = 0; e < n_ev; e++) {
        if (!evs[e].never) mk->alive[e / 64] |= (uint64_t)1 << (e % 64);
        for (int a = 0; a < evs[e].nr; a++) tested[evs[e].ranges[a].var] = 1;
    }
    mk->n_idx = 0;
    for (int v = 0; v < nv; v++) {
        if (tested[v] && vspan[v] <= MASK_SPAN) {
            mk->idx_var[mk->n_idx] = v;
            mk->tab_at[mk->n_idx] = total;
            total += (size_t)vspan[v] * words;
            mk->n_idx++;
        }
    }
    mk->tab = malloc(sizeof(uint64_t) * (total ? total : 1));
    if (!mk->tab) { free(tested); return -1; }
    memset(mk->tab, 0xff, sizeof(uint64_t) * total);
    for (int i = 0; i < mk->n_idx; i++) {
        int v = mk->idx_var[i];
        uint64_t *t = mk->tab + mk->tab_at[i];
        tested[v] = 2;                                   /* indexed */
        for (int e = 0; e < n_ev; e++) {
            for (int a = 0; a < evs[e].nr; a++) {
                const range_t *R = evs[e].ranges + a;
                if (R->var != v) continue;
                for (int64_t x = 0; x < vspan[v]; x++)
                    if (!((uint64_t)(x + vlo[v] - R->lo) <= R->width))
                        t[x * words + e / 64] &= ~((uint64_t)1 << (e % 64));
            }
        }
    }
    /* the ranges left to test one by one: those on variables without a table */
    for (int e = 0; e < n_ev; e++) {
        range_t *r = (range_t *)evs[e].ranges;
        int m = 0;
        for (int a = 0; a < evs[e].nr; a++)
            if (tested[r[a].var] != 2) r[m++] = r[a];
        evs[e].nr = m;
    }
    (void)ranges;
    free(tested);
    return 0;
}

/*
 * The transitions out of the state `vals` (code c0): *nt of them, to codes c1[t] at rates r[t] by
 * events ev[t], the updated variables' new values in newv[t * max_nu + u]. Returns ST_OK, or
 * ST_FALLBACK where the vectorised builder must decide (module comment).
 */
static int expand(const model_t *M, const double *vals, const int32_t *ivals, int64_t c0, int64_t *c1s,
                  double *rs, int *evi, double *newvs, int *nt)
{
    int t = 0, words = M->mk.words;
    uint64_t cand[MAX_EVENTS / 64];
    for (int w = 0; w < words; w++) cand[w] = M->mk.alive[w];
    for (int i = 0; i < M->mk.n_idx; i++) {
        int v = M->mk.idx_var[i];
        const uint64_t *row = M->mk.tab + M->mk.tab_at[i] + (size_t)(ivals[v] - M->lo[v]) * words;
        for (int w = 0; w < words; w++) cand[w] &= row[w];
    }
    for (int w = 0; w < words; w++)
    while (cand[w]) {
        int e = w * 64 + __builtin_ctzll(cand[w]);
        cand[w] &= cand[w] - 1;
        const event_t *E = M->evs + e;
        double g, r, *newv = newvs + (size_t)t * M->max_nu;
        int64_t c1 = c0;
        int ok = 1;
        for (int a = 0; a < E->nr; a++) {
            const range_t *R = E->ranges + a;
            ok &= (uint64_t)((int64_t)ivals[R->var] - R->lo) <= R->width;
        }
        if (!ok) continue;
        for (int a = 0; a < E->na; a++)
            if (!atom_holds(E->atoms + a, vals)) { ok = 0; break; }
        if (!ok) continue;
        for (int a = 0; a < E->ng; a++) {
            if (eval(M->code + E->gprogs[a], vals, M->consts, &g)) return ST_FALLBACK;
            if (g == 0.0) { ok = 0; break; }
        }
        if (!ok) continue;
        if (E->rate >= 0.0) {
            r = E->rate;
        } else if (eval(M->code + E->rate_prog, vals, M->consts, &r)) {
            return ST_FALLBACK;
        }
        if (!(r >= 0.0 && r < INFINITY)) return ST_FALLBACK;     /* NaN, negative, infinite */
        /* updates are evaluated where the rate is 0 too, as the vectorised builder evaluates them
           (an integer fault there is an error); only their values are not checked there */
        for (int u = 0; u < E->nu; u++) {
            const upd_t *U = E->ups + u;
            int var = U->var;
            double x;
            if (U->mode == 1) {
                x = vals[var] + U->k;
            } else if (U->mode == 2) {
                x = U->k;
            } else {
                if (eval(M->code + U->prog, vals, M->consts, &x)) return ST_FALLBACK;
                if (r == 0.0) continue;
                if (!(x == floor(x))) return ST_FALLBACK;          /* not an integer */
            }
            if (r == 0.0) continue;
            if (x < (double)M->lo[var] || x > (double)(M->lo[var] + M->span[var] - 1))
                return ST_FALLBACK;                                /* out of bounds */
            newv[u] = x;
            c1 += ((int64_t)x - (int64_t)vals[var]) * M->strides[var];
        }
        if (r == 0.0 || c1 == c0) continue;   /* no transition; a self-loop changes nothing in a generator */
        c1s[t] = c1;
        rs[t] = r;
        evi[t] = e;
        t++;
    }
    *nt = t;
    return ST_OK;
}

/* Row r of the generator from its transitions col/dat[start:nnz] (columns in the final numbering):
   sorted, duplicates summed, the diagonal (minus the row sum) in its place. Returns the new end,
   or SIZE_MAX when memory ran out. */
static size_t finish_row(int32_t *col, double *dat, size_t start, size_t nnz, int32_t r)
{
    size_t m = start;
    double out = 0.0;
    if (sort_row(col + start, dat + start, nnz - start) < 0) return SIZE_MAX;
    for (size_t k = start; k < nnz; k++) {
        if (m > start && col[m - 1] == col[k]) {
            dat[m - 1] += dat[k];
        } else {
            col[m] = col[k];
            dat[m] = dat[k];
            m++;
        }
    }
    nnz = m;
    /* the row sum as the vectorised builder takes it (np.add.reduceat of the sorted row) */
    if (nnz > start) out = dat[start] + pairwise_sum(dat + start + 1, nnz - start - 1);
    if (out != 0.0) {
        size_t k = nnz;
        while (k > start && col[k - 1] > r) {
            col[k] = col[k - 1];
            dat[k] = dat[k - 1];
            k--;
        }
        col[k] = r;
        dat[k] = -out;
        nnz++;
    }
    return nnz;
}

#endif
