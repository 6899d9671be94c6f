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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The opcodes; ctmc/_compiled.py reads their names from the module (OPS), so the two never differ.
   I-prefixed ones are integer arithmetic: exact below 2^53, never -0.0 (numpy's integers have none). */
#define OPCODES(X) X(END) X(VAR) X(CONST) X(ADD) X(SUB) X(MUL) X(IADD) X(ISUB) X(IMUL) X(DIV) \
    X(IFLOORDIV) X(IMOD) X(FFLOORDIV) X(FMOD) X(IPOW) X(NEG) X(INEG) X(ABS) X(LT) X(LE) X(GT) X(GE) \
    X(EQ) X(NE) X(AND) X(OR) X(NOT) X(WHERE) X(MIN) X(MAX)
#define OP_ENUM(name) OP_##name,
#define OP_NAME(name) #name,
enum { OPCODES(OP_ENUM) N_OPS };
static const char *op_names[] = { OPCODES(OP_NAME) };

/* statuses of explore and rows */
enum { ST_OK = 0, ST_FALLBACK = 1, ST_MAX_STATES = 2, ST_MEMORY = 3 };

#define EXACT 9007199254740992.0 /* 2^53 */
#define STACK 64                 /* the evaluation stack (exported: STACK) */
#define MAX_VARS 256             /* variables of a model (exported: MAX_VARS) */
#define MAX_EVENTS 4096          /* events of a model: 64 mask words (exported: MAX_EVENTS) */

/* numpy's float floor division and remainder (npy_divmod), b != 0 */
static double fdivmod(double a, double b, double *modulus)
{
    double mod = fmod(a, b), div, floordiv;
    div = (a - mod) / b;
    if (mod) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
        }
    } else {
        mod = copysign(0.0, b);
    }
    if (div) {
        floordiv = floor(div);
        if (div - floordiv > 0.5)
            floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, a / b);
    }
    *modulus = mod;
    return floordiv;
}

static inline double nanmin(double a, double b)
{
    if (a != a || b != b) return a + b;
    return a < b ? a : b;
}

static inline double nanmax(double a, double b)
{
    if (a != a || b != b) return a + b;
    return a > b ? a : b;
}

/* Evaluate one program; 0 and *out on success, 1 where the vectorised builder must decide.
   The top of the stack lives in `a`, the rest in st[]. */
static int eval(const int32_t *pc, const double *vals, const double *consts, double *out)
{
    double st[STACK], a = 0.0, b;
    int sp = 0;
    for (;;) {
        switch (*pc++) {
        case OP_END: *out = a; return 0;
        case OP_VAR: st[sp++] = a; a = vals[*pc++]; break;
        case OP_CONST: st[sp++] = a; a = consts[*pc++]; break;
        case OP_NEG: a = -a; break;
        case OP_INEG: a = 0.0 - a; break;
        case OP_ABS: a = fabs(a); break;
        case OP_NOT: a = a == 0.0 ? 1.0 : 0.0; break;
        case OP_WHERE: {
            /* stack: c, x, then y in a */
            double x = st[--sp], c = st[--sp];
            a = c != 0.0 ? x : a;
            break;
        }
        case OP_ADD: a = st[--sp] + a; break;
        case OP_SUB: a = st[--sp] - a; break;
        case OP_MUL: a = st[--sp] * a; break;
        case OP_DIV: a = st[--sp] / a; break;
        case OP_IADD: a = st[--sp] + a + 0.0; if (fabs(a) >= EXACT) return 1; break;
        case OP_ISUB: a = st[--sp] - a + 0.0; if (fabs(a) >= EXACT) return 1; break;
        case OP_IMUL: a = st[--sp] * a + 0.0; if (fabs(a) >= EXACT) return 1; break;
        case OP_IFLOORDIV: {
            int64_t x = (int64_t)st[--sp], y = (int64_t)a, q;
            if (y == 0) return 1;
            q = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
            a = (double)q;
            break;
        }
        case OP_IMOD: {
            int64_t x = (int64_t)st[--sp], y = (int64_t)a, m;
            if (y == 0) return 1;
            m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            a = (double)m;
            break;
        }
        case OP_FFLOORDIV: {
            double m;
            b = a;
            if (b == 0.0) return 1;
            a = fdivmod(st[--sp], b, &m);
            break;
        }
        case OP_FMOD: {
            double m;
            b = a;
            if (b == 0.0) return 1;
            fdivmod(st[--sp], b, &m);
            a = m;
            break;
        }
        case OP_IPOW: {
            double r = 1.0, base = st[--sp];
            int64_t e = (int64_t)a;
            if (e < 0) return 1;
            while (e) {
                if (e & 1) { r *= base; if (fabs(r) >= EXACT) return 1; }
                e >>= 1;
                if (e) { base *= base; if (fabs(base) >= EXACT) return 1; }
            }
            a = r;
            break;
        }
        case OP_LT: a = st[--sp] < a; break;
        case OP_LE: a = st[--sp] <= a; break;
        case OP_GT: a = st[--sp] > a; break;
        case OP_GE: a = st[--sp] >= a; break;
        case OP_EQ: a = st[--sp] == a; break;
        case OP_NE: a = st[--sp] != a; break;
        case OP_AND: b = st[--sp]; a = (b != 0.0) && (a != 0.0); break;
        case OP_OR: b = st[--sp]; a = (b != 0.0) || (a != 0.0); break;
        case OP_MIN: a = nanmin(st[--sp], a); break;
        case OP_MAX: a = nanmax(st[--sp], a); break;
        default: return 1;
        }
    }
}

/* ---- growable arrays ---------------------------------------------------- */
typedef struct {
    void *p;
    size_t n, cap, size;
} vec;

static int vec_reserve(vec *v, size_t need, size_t *bytes)
{
    if (need <= v->cap) return 0;
    size_t cap = v->cap ? v->cap : 1024;
    while (cap < need) cap *= 2;
    void *q = realloc(v->p, cap * v->size);
    if (!q) return -1;
    *bytes += (cap - v->cap) * v->size;
    v->p = q;
    v->cap = cap;
    return 0;
}

/* ---- code -> discovery index ---------------------------------------------- */
typedef struct {
    int64_t key;         /* a code, -1 empty */
    int64_t val;         /* its discovery index (one 16-byte slot: one cache line read a probe) */
} slot_t;

typedef struct {
    int32_t *table;      /* dense: one slot per box point */
    slot_t *slots;       /* hashed: open addressing, linear probing */
    uint64_t mask;
    int shift;
    size_t used;
} index_t;

static inline uint64_t hash64(int64_t k, int shift)
{
    return ((uint64_t)k * 0x9E3779B97F4A7C15ULL) >> shift;
}

static int index_grow(index_t *ix, size_t *bytes)
{
    uint64_t cap = (ix->mask + 1) * 2, i;
    slot_t *slots = malloc(cap * sizeof(slot_t));
    if (!slots) return -1;
    memset(slots, 0xff, cap * sizeof(slot_t));
    int shift = ix->shift - 1;
    for (i = 0; i <= ix->mask; i++) {
        if (ix->slots[i].key >= 0) {
            uint64_t h = hash64(ix->slots[i].key, shift);
            while (slots[h].key >= 0) h = (h + 1) & (cap - 1);
            slots[h] = ix->slots[i];
        }
    }
    *bytes += (cap - (ix->mask + 1)) * sizeof(slot_t);
    free(ix->slots);
    ix->slots = slots;
    ix->mask = cap - 1;
    ix->shift = shift;
    return 0;
}

/* ask for the cache line where `code` is or would be (the lookups of one state then overlap) */
static inline void index_prefetch(const index_t *ix, int64_t code)
{
    if (ix->table) __builtin_prefetch(ix->table + code);
    else __builtin_prefetch(ix->slots + hash64(code, ix->shift));
}

/* the index of `code`, or -1 */
static inline int64_t index_find(const index_t *ix, int64_t code)
{
    if (ix->table) return ix->table[code];
    uint64_t h = hash64(code, ix->shift);
    for (;;) {
        int64_t k = ix->slots[h].key;
        if (k == code) return ix->slots[h].val;
        if (k < 0) return -1;
        h = (h + 1) & ix->mask;
    }
}

/* an empty index: one slot per box point (dense), or a hash table */
static int index_init(index_t *ix, int dense, int64_t box, size_t *bytes)
{
    memset(ix, 0, sizeof(*ix));
    if (dense) {
        ix->table = malloc((size_t)box * sizeof(int32_t));
        if (!ix->table) return -1;
        memset(ix->table, 0xff, (size_t)box * sizeof(int32_t));
        *bytes += (size_t)box * 4;
    } else {
        ix->mask = 1023;
        ix->shift = 64 - 10;
        ix->slots = malloc(1024 * sizeof(slot_t));
        if (!ix->slots) return -1;
        memset(ix->slots, 0xff, 1024 * sizeof(slot_t));
    }
    return 0;
}

/* the hashed index turned into a table over the box (same contents); -1 when memory runs out */
static int index_to_table(index_t *ix, int64_t box, size_t *bytes)
{
    int32_t *table = malloc((size_t)box * sizeof(int32_t));
    if (!table) return -1;
    memset(table, 0xff, (size_t)box * sizeof(int32_t));
    for (uint64_t i = 0; i <= ix->mask; i++)
        if (ix->slots[i].key >= 0) table[ix->slots[i].key] = (int32_t)ix->slots[i].val;
    *bytes += (size_t)box * 4;
    free(ix->slots);
    ix->slots = NULL;
    ix->table = table;
    return 0;
}

/* set the value of a code already in the index */
static inline void index_set(index_t *ix, int64_t code, int32_t value)
{
    if (ix->table) { ix->table[code] = value; return; }
    uint64_t h = hash64(code, ix->shift);
    while (ix->slots[h].key != code) h = (h + 1) & ix->mask;
    ix->slots[h].val = value;
}

/* the index of `code`, inserting `fresh` if unseen (then *isnew = 1); -2 on allocation failure */
static inline int64_t index_get(index_t *ix, int64_t code, int32_t fresh, int *isnew, size_t *bytes)
{
    *isnew = 0;
    if (ix->table) {
        int32_t v = ix->table[code];
        if (v >= 0) return v;
        ix->table[code] = fresh;
        *isnew = 1;
        return fresh;
    }
    uint64_t h = hash64(code, ix->shift);
    for (;;) {
        int64_t k = ix->slots[h].key;
        if (k == code) return ix->slots[h].val;
        if (k < 0) break;
        h = (h + 1) & ix->mask;
    }
    ix->slots[h].key = code;
    ix->slots[h].val = fresh;
    *isnew = 1;
    if (++ix->used * 2 > ix->mask + 1 && index_grow(ix, bytes) < 0) return -2;
    return fresh;
}

/* LSD radix sort of (code, index) pairs by code, 8 bits a pass over `bits` bits */
static int radix_sort(int64_t *key, int32_t *val, size_t n, int bits)
{
    int64_t *k2 = malloc(n * sizeof(int64_t));
    int32_t *v2 = malloc(n * sizeof(int32_t));
    size_t count[257];
    int shift;
    if (!k2 || !v2) { free(k2); free(v2); return -1; }
    for (shift = 0; shift < bits; shift += 8) {
        size_t i;
        memset(count, 0, sizeof(count));
        for (i = 0; i < n; i++) count[((uint64_t)key[i] >> shift & 0xff) + 1]++;
        for (i = 1; i < 257; i++) count[i] += count[i - 1];
        for (i = 0; i < n; i++) {
            size_t d = count[(uint64_t)key[i] >> shift & 0xff]++;
            k2[d] = key[i];
            v2[d] = val[i];
        }
        memcpy(key, k2, n * sizeof(int64_t));
        memcpy(val, v2, n * sizeof(int32_t));
    }
    free(k2);
    free(v2);
    return 0;
}

/* sort a row's (column, value) pairs by column, stably (duplicates then sum in the order of the
   events, as the vectorised builder sums them): insertion sort, merge sort for long rows */
static int sort_row(int32_t *col, double *val, size_t n)
{
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            int32_t c = col[i];
            double v = val[i];
            size_t j = i;
            while (j > 0 && col[j - 1] > c) {
                col[j] = col[j - 1];
                val[j] = val[j - 1];
                j--;
            }
            col[j] = c;
            val[j] = v;
        }
        return 0;
    }
    int32_t *c2 = malloc(n * sizeof(int32_t));
    double *v2 = malloc(n * sizeof(double));
    if (!c2 || !v2) { free(c2); free(v2); return -1; }
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                if (col[j] < col[i]) { c2[k] = col[j]; v2[k++] = val[j++]; }
                else { c2[k] = col[i]; v2[k++] = val[i++]; }
            }
            while (i < mid) { c2[k] = col[i]; v2[k++] = val[i++]; }
            while (j < hi) { c2[k] = col[j]; v2[k++] = val[j++]; }
        }
        memcpy(col, c2, n * sizeof(int32_t));
        memcpy(val, v2, n * sizeof(double));
    }
    free(c2);
    free(v2);
    return 0;
}

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
        if (r == 0.0) continue;
        if (!(r > 0.0 && r < INFINITY)) return ST_FALLBACK;      /* NaN, negative, infinite */
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
                if (!(x == floor(x))) return ST_FALLBACK;          /* not an integer */
            }
            if (x < (double)M->lo[var] || x > (double)(M->lo[var] + M->span[var] - 1))
                return ST_FALLBACK;                                /* out of bounds */
            newv[u] = x;
            c1 += ((int64_t)x - (int64_t)vals[var]) * M->strides[var];
        }
        if (c1 == c0) continue;          /* a self-loop changes nothing in a generator */
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
