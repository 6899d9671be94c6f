/*
 * The bytecode of ctmc._explore: its opcodes (ctmc/_compiled.py reads their names from the module)
 * and the stack interpreter that evaluates a compiled guard, rate or update on one state.
 * Included once, by _explore.c (one translation unit: the functions stay static and inlinable).
 */
#ifndef CTMC_EXPLORE_VM_H
#define CTMC_EXPLORE_VM_H

/* The opcodes; ctmc/_compiled.py reads their names from the module (OPS), so the two never differ.
   I-prefixed ones are integer arithmetic: exact below 2^53, never -0.0 (numpy's integers have none).
   VAR and CONST take one operand (a column, a constant), TABLE two (its first constant, its length).
   JUMPZ and JUMP take one, an offset from the next opcode: JUMPZ pops the top and jumps if it is 0,
   JUMP jumps; where(c, x, y) is emitted as c JUMPZ(->y) x JUMP(->end) y, so the branch not taken is
   never evaluated (numpy's where evaluates both, but ctmc.expr ignores faults in the branch not taken;
   &, | are emitted alike, ctmc/_compiled.py emit_lazy). */
#define OPCODES(X) X(END) X(VAR) X(CONST) X(ADD) X(SUB) X(MUL) X(IADD) X(ISUB) X(IMUL) X(DIV) \
    X(IFLOORDIV) X(IMOD) X(FFLOORDIV) X(FMOD) X(IPOW) X(NEG) X(INEG) X(ABS) X(LT) X(LE) X(GT) X(GE) \
    X(EQ) X(NE) X(NOT) X(MIN) X(MAX) X(TABLE) X(JUMPZ) X(JUMP)
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
        case OP_TABLE: {
            /* operands: the table's first constant and its length; the index (an integer) in a */
            int32_t first = *pc++, len = *pc++;
            if (!(a >= 0.0 && a < (double)len)) return 1;       /* outside: the vectorised builder names it */
            a = consts[first + (int32_t)a];
            break;
        }
        case OP_JUMPZ: {
            int32_t off = *pc++;
            int zero = a == 0.0;
            a = st[--sp];
            if (zero) pc += off;
            break;
        }
        case OP_JUMP: pc += *pc + 1; break;
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
        case OP_MIN: a = nanmin(st[--sp], a); break;
        case OP_MAX: a = nanmax(st[--sp], a); break;
        default: return 1;
        }
    }
}


#endif
