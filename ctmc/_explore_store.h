/*
 * Storage of ctmc._explore: growable arrays, the code -> discovery index (a dense table or an
 * open-addressing hash), and the sorts of codes and of row entries.
 * Included once, by _explore.c (one translation unit).
 */
#ifndef CTMC_EXPLORE_STORE_H
#define CTMC_EXPLORE_STORE_H

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


#endif
