/*
 * Stochastic simulation of a compiled model (the entry points sim_* of ctmc._explore; ctmc/simulate.py).
 *
 * Gillespie's direct method on the bytecode of ctmc._compiled, without building the chain: in the
 * current state x every event's guard, rate and update are evaluated by expand() (the builder's own
 * expansion of one state, _explore_events.h, and its stack interpreter eval(), _explore_vm.h: one
 * evaluator), giving the transitions x -> y_k at rates r_k (self-loops and rate 0 dropped, as in the
 * generator). With R = sum_k r_k the holding time is Exp(R), drawn as -log(1 - U) / R, and transition k
 * is chosen with probability r_k / R (U * R against the running sum of the r_k, in the order of the
 * events). R = 0: the state is absorbing, the path stays there for ever.
 *
 * Random numbers: xoshiro256** (Blackman and Vigna, 2018), a 2^256 - 1 period generator; run r of a
 * call with seed s has its own generator, seeded by four outputs of splitmix64 started from
 * splitmix64(s) + r * 0x9E3779B97F4A7C15, so a run's path depends on (s, r) only: not on the number
 * of threads the runs are spread over, nor on their order. A uniform is the top 53 bits times 2^-53.
 *
 * Functions evaluated along the path (the measures) are programs of the same bytecode (their start in
 * `code`); the target of a hitting time is one such program (nonzero: in the target).
 * Whatever expand() leaves to the vectorised builder (ST_FALLBACK: a value beyond 2^53, a division
 * by zero, an invalid rate, an update out of bounds) stops the simulation with that status and the
 * code of the state, which ctmc/simulate.py reports. The GIL is released while paths are drawn
 * (it is taken back every 2^20 events to look for Ctrl-C).
 * Included once, by _explore.c, after _explore_events.h.
 */
#ifndef CTMC_EXPLORE_SIM_H
#define CTMC_EXPLORE_SIM_H

typedef struct { uint64_t s[4]; } rng_t;

static inline uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void rng_seed(rng_t *g, uint64_t seed, uint64_t run)
{
    uint64_t x = seed, base = splitmix64(&x);
    x = base + run * 0x9E3779B97F4A7C15ULL;
    for (int k = 0; k < 4; k++) g->s[k] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(rng_t *g)       /* xoshiro256** */
{
    uint64_t *s = g->s, r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static inline double rng_uniform(rng_t *g) { return (double)(rng_next(g) >> 11) * 0x1.0p-53; }   /* [0, 1) */

/* one path's state and the model's one-state buffers */
typedef struct {
    const engine_t *g;
    rng_t rng;
    int64_t code;
    double vals[MAX_VARS];
    int32_t ivals[MAX_VARS];
    double t;
    long long events;
} path_t;

static void path_start(path_t *p, const engine_t *g, const int64_t *inits, Py_ssize_t n_init, uint64_t seed,
                       uint64_t run)
{
    p->g = g;
    rng_seed(&p->rng, seed, run);
    p->code = inits[n_init > 1 ? (Py_ssize_t)(rng_uniform(&p->rng) * n_init) : 0];
    decode(g, p->code, p->vals, p->ivals);
    p->t = 0.0;
    p->events = 0;
}

#define SIM_ST_INTERRUPTED 10
#define SIM_ST_INF_RATE 11       /* the total rate out of the state is inf (finite rates overflowing) */

/* Draw the next event: *dt the holding time (INFINITY in an absorbing state, nothing moves) and,
   in *ev, the event that fires (-1 when absorbing); the move is made by path_move. ST_OK or ST_FALLBACK. */
static int path_draw(path_t *p, double *dt, int *ev, int *which)
{
    const engine_t *g = p->g;
    int nt, st = expand(&g->M, p->vals, p->ivals, p->code, g->c1s, g->rs, g->evi, g->newvs, &nt);
    double total = 0.0, u, acc = 0.0;
    int k;
    if (st != ST_OK) return st;
    for (k = 0; k < nt; k++) total += g->rs[k];
    if (nt == 0 || !(total > 0.0)) { *dt = INFINITY; *ev = -1; return ST_OK; }
    if (!(total < INFINITY)) return SIM_ST_INF_RATE;    /* the sum overflows: no draw is right */
    *dt = -log(1.0 - rng_uniform(&p->rng)) / total;
    u = rng_uniform(&p->rng) * total;
    for (k = 0; k < nt - 1; k++) {
        acc += g->rs[k];
        if (u < acc) break;
    }
    *which = k;
    *ev = g->evi[k];
    return ST_OK;
}

/* make transition `which` of the last draw */
static inline void path_move(path_t *p, int which)
{
    const engine_t *g = p->g;
    const event_t *E = g->M.evs + g->evi[which];
    const double *newv = g->newvs + (size_t)which * g->M.max_nu;
    for (int u = 0; u < E->nu; u++) {
        p->vals[E->ups[u].var] = newv[u];
        p->ivals[E->ups[u].var] = (int32_t)newv[u];
    }
    p->code = g->c1s[which];
    p->events++;
}

/* the measures' values in the path's state; ST_OK or ST_FALLBACK */
static inline int path_measures(const path_t *p, const int32_t *fstart, int nf, double *out)
{
    for (int f = 0; f < nf; f++)
        if (eval(p->g->M.code + fstart[f], p->vals, p->g->M.consts, out + f)) return ST_FALLBACK;
    return ST_OK;
}

/* every 2^20 events: the GIL back for a moment, to see Ctrl-C */
static inline int sim_interrupted(PyThreadState **ts, long long *tick)
{
    int bad;
    if (++*tick & 0xfffff) return 0;
    PyEval_RestoreThread(*ts);
    bad = PyErr_CheckSignals() < 0;
    *ts = PyEval_SaveThread();
    return bad;
}

/* the common arguments: the model (6 buffers), the initial codes, the seed */
typedef struct {
    PyObject *obj[N_MODEL_ARGS], *o_init;
    unsigned long long seed;
    Py_buffer b_init;
    engine_t g;
    int opened;
} sim_args_t;

static int sim_open(sim_args_t *a)
{
    int st;
    if (get_buffer(a->o_init, &a->b_init, 8, "init") < 0) return -1;
    st = engine_open(&a->g, a->obj);
    a->opened = 1;
    if (st == ST_FALLBACK) PyErr_SetString(PyExc_ValueError, "the model is beyond the compiled engine");
    return st == 0 ? 0 : -1;
}

static void sim_close(sim_args_t *a)
{
    if (a->opened) engine_close(&a->g);
    if (a->b_init.obj) PyBuffer_Release(&a->b_init);
}

static PyObject *sim_result(int status, PyObject *data, long long events, int64_t code)
{
    if (status == SIM_ST_INTERRUPTED) { Py_XDECREF(data); return NULL; }
    return Py_BuildValue("iNLL", status, data, events, (long long)code);
}

#define SIM_PARSE_MODEL "OOOOOOOK"
#define SIM_MODEL_ARGS(a) &a.obj[0], &a.obj[1], &a.obj[2], &a.obj[3], &a.obj[4], &a.obj[5], &a.o_init, &a.seed

/*
 * sim_transient(code, consts, events, lo, span, strides, init, seed, run0, run1, times, fstart, max_events)
 * Runs run0..run1-1 up to the last of `times` (sorted, >= 0); the measures `fstart` (int32 program
 * starts) at each time. Returns (status, values, events, code): values float64 [run][time][measure]
 * (a bytearray), the events drawn, the state's code where a status other than ST_OK stopped it;
 * status 2: a run reached max_events before the last time.
 */
static PyObject *sim_transient(PyObject *Py_UNUSED(self), PyObject *args)
{
    sim_args_t a;
    PyObject *o_times, *o_f, *out = NULL;
    long long run0, run1, max_events, total = 0, tick = 0;
    Py_buffer bt = {0}, bf = {0};
    int status = ST_OK;
    int64_t bad = -1;
    memset(&a, 0, sizeof(a));
    if (!PyArg_ParseTuple(args, SIM_PARSE_MODEL "LLOOL", SIM_MODEL_ARGS(a), &run0, &run1, &o_times, &o_f,
                          &max_events))
        return NULL;
    if (get_buffer(o_times, &bt, 8, "times") < 0 || get_buffer(o_f, &bf, 4, "fstart") < 0 || sim_open(&a) < 0)
        goto release;
    {
        const double *times = bt.buf;
        const int32_t *fs = bf.buf;
        Py_ssize_t m = bt.len / 8, nf = bf.len / 4, n_init = a.b_init.len / 8;
        double *val;
        path_t p;
        out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((run1 - run0) * m * nf * 8));
        if (!out) goto release;
        val = (double *)PyByteArray_AS_STRING(out);
        PyThreadState *ts = PyEval_SaveThread();
        for (long long r = run0; r < run1 && status == ST_OK; r++) {
            Py_ssize_t k = 0;
            path_start(&p, &a.g, a.b_init.buf, n_init, a.seed, (uint64_t)r);
            while (k < m) {
                double dt;
                int ev, which = 0;
                if ((status = path_draw(&p, &dt, &ev, &which)) != ST_OK) break;
                for (; k < m && times[k] < p.t + dt; k++)         /* the state at times in [t, t + dt) */
                    if ((status = path_measures(&p, fs, (int)nf, val + ((r - run0) * m + k) * nf)) != ST_OK)
                        break;
                if (status != ST_OK || k == m) break;
                if (p.events >= max_events) { status = ST_MAX_STATES; break; }
                p.t += dt;
                path_move(&p, which);
                if (sim_interrupted(&ts, &tick)) { status = SIM_ST_INTERRUPTED; break; }
            }
            total += p.events;
            bad = p.code;
        }
        PyEval_RestoreThread(ts);
    }
    out = sim_result(status, out, total, bad);
release:
    if (bt.obj) PyBuffer_Release(&bt);
    if (bf.obj) PyBuffer_Release(&bf);
    sim_close(&a);
    return out;
}

/*
 * sim_batches(code, consts, events, lo, span, strides, init, seed, warmup, batch, n_batches, fstart,
 *             max_events)
 * One path (run 0): the time integrals of the measures over [warmup + b * batch, warmup + (b+1) * batch)
 * for b < n_batches (a sojourn across a boundary is split). Returns (status, integrals, events, code):
 * integrals float64 [batch][measure + 1], the last column the number of jumps in the batch;
 * status 2: max_events reached first.
 */
static PyObject *sim_batches(PyObject *Py_UNUSED(self), PyObject *args)
{
    sim_args_t a;
    PyObject *o_f, *out = NULL;
    double warmup, batch;
    long long nb, max_events, tick = 0;
    Py_buffer bf = {0};
    int status = ST_OK;
    memset(&a, 0, sizeof(a));
    if (!PyArg_ParseTuple(args, SIM_PARSE_MODEL "ddLOL", SIM_MODEL_ARGS(a), &warmup, &batch, &nb, &o_f,
                          &max_events))
        return NULL;
    if (get_buffer(o_f, &bf, 4, "fstart") < 0 || sim_open(&a) < 0) goto release;
    if (bf.len / 4 > STACK) { PyErr_SetString(PyExc_ValueError, "more than 64 measures"); goto release; }
    {
        const int32_t *fs = bf.buf;
        int nf = (int)(bf.len / 4), w = nf + 1;       /* a row: the integrals, the jumps */
        double *acc, fv[STACK];
        long long b = 0;
        path_t p;
        out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(nb * w * 8));
        if (!out) goto release;
        acc = (double *)PyByteArray_AS_STRING(out);
        memset(acc, 0, (size_t)(nb * w * 8));
        PyThreadState *ts = PyEval_SaveThread();
        path_start(&p, &a.g, a.b_init.buf, a.b_init.len / 8, a.seed, 0);
        while (b < nb) {
            double dt, t0, t1;
            int ev, which = 0;
            if ((status = path_draw(&p, &dt, &ev, &which)) != ST_OK) break;
            t1 = p.t + dt;
            if (t1 > warmup) {
                if ((status = path_measures(&p, fs, nf, fv)) != ST_OK) break;
                t0 = p.t > warmup ? p.t : warmup;
                while (b < nb) {                              /* [t0, t1) split over the batches */
                    double end = warmup + (double)(b + 1) * batch, upto = t1 < end ? t1 : end;
                    for (int f = 0; f < nf; f++) acc[b * w + f] += fv[f] * (upto - t0);
                    if (t1 < end) break;
                    t0 = end;
                    b++;
                }
            }
            if (b == nb) break;
            if (p.events >= max_events) { status = ST_MAX_STATES; break; }
            p.t = t1;
            path_move(&p, which);
            if (t1 > warmup) acc[b * w + nf] += 1.0;           /* the jump at t1, in batch b */
            if (sim_interrupted(&ts, &tick)) { status = SIM_ST_INTERRUPTED; break; }
        }
        PyEval_RestoreThread(ts);
        out = sim_result(status, out, p.events, p.code);
    }
release:
    if (bf.obj) PyBuffer_Release(&bf);
    sim_close(&a);
    return out;
}

/*
 * sim_hitting(code, consts, events, lo, span, strides, init, seed, run0, run1, target, max_time, max_events)
 * The first time each run's state satisfies the program `target` (0 if the initial state does).
 * Returns (status, (times, outcome), events, code): times float64 per run; outcome int8 per run:
 * 0 hit, 1 censored at max_time, 2 censored at max_events, 3 absorbed outside the target (never hits).
 */
static PyObject *sim_hitting(PyObject *Py_UNUSED(self), PyObject *args)
{
    sim_args_t a;
    PyObject *o_t = NULL, *o_o = NULL, *out = NULL;
    long long run0, run1, max_events, total = 0, tick = 0;
    int target, status = ST_OK;
    double max_time;
    int64_t bad = -1;
    memset(&a, 0, sizeof(a));
    if (!PyArg_ParseTuple(args, SIM_PARSE_MODEL "LLidL", SIM_MODEL_ARGS(a), &run0, &run1, &target, &max_time,
                          &max_events))
        return NULL;
    if (sim_open(&a) < 0) goto release;
    o_t = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((run1 - run0) * 8));
    o_o = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(run1 - run0));
    if (!o_t || !o_o) goto release;
    {
        double *times = (double *)PyByteArray_AS_STRING(o_t);
        char *outcome = PyByteArray_AS_STRING(o_o);
        PyThreadState *ts = PyEval_SaveThread();
        path_t p;
        for (long long r = run0; r < run1 && status == ST_OK; r++) {
            double in, dt;
            int ev, which = 0;
            char oc;
            path_start(&p, &a.g, a.b_init.buf, a.b_init.len / 8, a.seed, (uint64_t)r);
            for (;;) {
                if (eval(a.g.M.code + target, p.vals, a.g.M.consts, &in)) { status = ST_FALLBACK; break; }
                if (in != 0.0) { oc = 0; break; }
                if (p.events >= max_events) { oc = 2; break; }
                if ((status = path_draw(&p, &dt, &ev, &which)) != ST_OK) break;
                if (ev < 0) { oc = 3; break; }
                if (p.t + dt > max_time) { oc = 1; break; }
                p.t += dt;
                path_move(&p, which);
                if (sim_interrupted(&ts, &tick)) { status = SIM_ST_INTERRUPTED; break; }
            }
            total += p.events;
            bad = p.code;
            if (status != ST_OK) break;
            times[r - run0] = p.t;
            outcome[r - run0] = oc;
        }
        PyEval_RestoreThread(ts);
    }
    out = Py_BuildValue("(OO)", o_t, o_o);
    out = out ? sim_result(status, out, total, bad) : NULL;
release:
    Py_XDECREF(o_t);
    Py_XDECREF(o_o);
    sim_close(&a);
    return out;
}

/*
 * sim_path(code, consts, events, lo, span, strides, init, seed, run, n_events, max_time)
 * One path (run `run`): up to n_events jumps and no later than max_time. Returns (status,
 * (times, codes, events), events, code): the jump times (the first 0.0), the state codes entered
 * (the first the initial one) and the event fired at each jump (-1 for the start).
 */
static PyObject *sim_path(PyObject *Py_UNUSED(self), PyObject *args)
{
    sim_args_t a;
    PyObject *o_t = NULL, *o_c = NULL, *o_e = NULL, *out = NULL;
    long long run, n_ev, tick = 0;
    double max_time;
    int status = ST_OK;
    Py_ssize_t k = 0;
    path_t p;
    memset(&a, 0, sizeof(a));
    if (!PyArg_ParseTuple(args, SIM_PARSE_MODEL "LLd", SIM_MODEL_ARGS(a), &run, &n_ev, &max_time))
        return NULL;
    if (sim_open(&a) < 0) goto release;
    o_t = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((n_ev + 1) * 8));
    o_c = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((n_ev + 1) * 8));
    o_e = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((n_ev + 1) * 4));
    if (!o_t || !o_c || !o_e) goto release;
    {
        double *ts_ = (double *)PyByteArray_AS_STRING(o_t);
        int64_t *cs = (int64_t *)PyByteArray_AS_STRING(o_c);
        int32_t *es = (int32_t *)PyByteArray_AS_STRING(o_e);
        PyThreadState *ts = PyEval_SaveThread();
        path_start(&p, &a.g, a.b_init.buf, a.b_init.len / 8, a.seed, (uint64_t)run);
        ts_[0] = 0.0;
        cs[0] = p.code;
        es[0] = -1;
        for (k = 1; k <= n_ev; k++) {
            double dt;
            int ev, which = 0;
            if ((status = path_draw(&p, &dt, &ev, &which)) != ST_OK || ev < 0 || p.t + dt > max_time) break;
            p.t += dt;
            path_move(&p, which);
            ts_[k] = p.t;
            cs[k] = p.code;
            es[k] = ev;
            if (sim_interrupted(&ts, &tick)) { status = SIM_ST_INTERRUPTED; break; }
        }
        PyEval_RestoreThread(ts);
    }
    if (PyByteArray_Resize(o_t, k * 8) < 0 || PyByteArray_Resize(o_c, k * 8) < 0
        || PyByteArray_Resize(o_e, k * 4) < 0)
        goto release;
    out = Py_BuildValue("(OOO)", o_t, o_c, o_e);
    out = out ? sim_result(status, out, p.events, p.code) : NULL;
release:
    Py_XDECREF(o_t);
    Py_XDECREF(o_c);
    Py_XDECREF(o_e);
    sim_close(&a);
    return out;
}

#define SIM_METHODS \
    {"sim_transient", sim_transient, METH_VARARGS, "Measures at given times (see ctmc/simulate.py)."}, \
    {"sim_batches", sim_batches, METH_VARARGS, "Batch integrals of one long path (see ctmc/simulate.py)."}, \
    {"sim_hitting", sim_hitting, METH_VARARGS, "Simulated hitting times (see ctmc/simulate.py)."}, \
    {"sim_path", sim_path, METH_VARARGS, "One simulated path (see ctmc/simulate.py)."},

#endif
