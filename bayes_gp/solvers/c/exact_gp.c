/* The exact GP's log density and gradient for nuts-rs (nutpie), as C that a C compiler turns
 * into a shared library in well under a second: no per-model compilation.
 *
 * bayes_gp.inference.native_gp describes the model (the kernel's terms and factors, which
 * coordinate of the unconstrained vector holds which log-hyperparameter, the priors) in a gp_t
 * and hands nutpie the addresses of gp_logp and gp_expand with a pointer to it. Both follow
 * nutpie's C calling convention (the numba entry points of bayes_gp.inference.nutpie_compile):
 * the return value is 0 on success, 3 for a non-finite gradient, 4 for a non-finite log density
 * (C not positive definite included: nuts-rs treats positive codes as a divergence), -1 for a
 * dimension mismatch, 1 when memory could not be allocated.
 *
 * The model (R&W eq. 2.30, PRML eq. 6.69, as bayes_gp.solvers.exact.ExactLikelihood declares
 * it): y - m ~ N(0, C), C = K + (sigma^2 + jitter) I, with the kernel a sum of products
 * (R&W §4.2.4, PRML eqs. 6.17-6.22)
 *   K(x, x') = sum_t eta_t^2 prod_{f in t} k_f(x, x'),
 * each factor one of, with r^2 = sum_d (x_d - x'_d)^2 / ls_d^2 (ls isotropic or one per input),
 *   expquad   exp(-r^2/2)                              (R&W eq. 4.9)
 *   matern52  (1 + s + s^2/3) exp(-s), s = sqrt(5 r^2)  (R&W eq. 4.17b)
 *   matern32  (1 + s) exp(-s),          s = sqrt(3 r^2)  (R&W eq. 4.17a)
 *   matern12  exp(-s),                  s = sqrt(r^2)    (R&W eq. 4.16)
 *   ratquad   (1 + r^2/(2 alpha))^-alpha, as exp(-alpha log1p(r^2/(2 alpha)))   (R&W eq. 4.19)
 *   periodic  exp(-2 sum_d sin^2(pi (x_d - x'_d)/p) / ls_d^2)   (R&W eq. 4.31, bayes_gp's
 *             scaling: bayes_gp.kernels.Periodic)
 * log p(y) = -y'C^-1 y / 2 - log|C| / 2 - n log(2 pi) / 2                     (R&W eq. 2.30)
 * d log p / d theta = tr((alpha alpha' - C^-1) dC/dtheta) / 2, alpha = C^-1 y   (R&W eq. 5.9)
 * with theta the logs of the ls_d, eta_t, sigma, p and alpha; each of them a coordinate u of
 * the unconstrained vector on PyMC's log transform, theta = s u (s = 1; a chained log and
 * scale transform gives another s), whose log-Jacobian s u + log s is added, or a fixed
 * number; plus each coordinate's prior log density written in theta.
 *
 * LAPACK (dpotrf, dtrtri, dlauum) and BLAS (dtrmm) are SciPy's, called through the addresses of
 * scipy.linalg.cython_lapack and cython_blas, so nothing here links against a BLAS. Row-major n x n arrays are
 * handed to LAPACK as they are: LAPACK's 'L' triangle of the column-major view is the row-major
 * upper triangle, which is the one filled here.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*potrf_t)(char *, int *, double *, int *, int *);
typedef void (*lauum_t)(char *, int *, double *, int *, int *);
typedef void (*trtri_t)(char *, char *, int *, double *, int *, int *);
typedef void (*trmm_t)(char *, char *, char *, char *, int *, int *, double *, double *, int *,
                       double *, int *);

enum { K_EXPQUAD = 0, K_MATERN52 = 1, K_MATERN32 = 2, K_MATERN12 = 3, K_RATQUAD = 4,
       K_PERIODIC = 5 };
enum {
    P_LOGNORMAL = 0,
    P_HALFNORMAL = 1,
    P_GAMMA = 2,
    P_INVGAMMA = 3,
    P_EXPONENTIAL = 4,
    P_HALFCAUCHY = 5,
    P_NORMAL = 6 /* of an untransformed coordinate: u is the value itself */
};

/* Every struct here has 8-byte fields only: Python fills each as a flat array of 64-bit words
 * (native_gp.py's _LAYOUT, _COORDS_LAYOUT; native_latent.py's, in this order). */

/* The coordinates of the unconstrained vector: their priors and transforms, and which of
 * nutpie's stored values they give. */
typedef struct {
    int64_t n_free, n_head;      /* coordinates; stored values that are coordinates' values */
    const int64_t *prior_kind;   /* n_free */
    const double *prior_a, *prior_b, *prior_c; /* n_free: parameters and constant term */
    const double *scale;         /* n_free: the log of the value is scale * u (P_NORMAL: unused) */
    const int64_t *expand_src, *expand_exp;    /* n_head: coordinate, and 1 for its value */
} coords_t;

/* A kernel and its exact GP: the log-parameters in slots (slot_src: the coordinate, -1 for a
 * fixed value, slot_fixed: its log), the terms (term_eta: the slot of log eta_t; term_first:
 * each term's first factor, n_term + 1 entries) and the factors (fac_kind, fac_ls: the slot of
 * log ls_1, fac_nls: 1 or d, fac_extra: the slot of log p or log alpha, or -1). */
typedef struct gp_s {
    int64_t n, d, n_slot, n_term, n_fac, slot_sigma; /* slot_sigma -1: no noise of its own */
    double jitter;
    const double *XT;                   /* d x n, the inputs by dimension */
    const double *y;                    /* n, y minus the (fixed) mean */
    const coords_t *c;
    const int64_t *slot_src;
    const double *slot_fixed;
    const int64_t *term_eta, *term_first;
    const int64_t *fac_kind, *fac_ls, *fac_nls, *fac_extra;
    potrf_t potrf;
    lauum_t lauum;
    trtri_t trtri;
    trmm_t trmm;   /* BLAS */
    /* Inputs on a grid (one column, x_i = x_0 + s k_i; bayes_gp.kernels.lags): the kernel is
     * evaluated at the lags s l, l = 0..J, only, as the gp_t `table` of the J + 1 points s l
     * (its row 0), and K_ij gathered from it at l = |k_i - k_j| (grid: the k_i); the
     * gradient's weights are summed into the lags and the table differentiated. NULL: all
     * pairs. */
    const struct gp_s *table;
    const int64_t *grid;
} gp_t;

/* Order of the diagonal blocks inverted by dtrtri in inverse_from_factor (16 was the quickest
 * of 16 / 32 / 64 at n = 100 to 500 for the same scheme in bayes_gp.solvers._numba_lapack). */
#define TRI_LEAF 16

/* L^-1 from the lower triangular L (column-major, leading dimension n), written over L's
 * triangle, without dtrtri over the whole matrix, which OpenBLAS runs at a fifth of its
 * product rate at these sizes: the inverses of its TRI_LEAF diagonal blocks, adjacent
 * inverted blocks joined pairwise by
 *   [[L11, 0], [L21, L22]]^-1 = [[L11^-1, 0], [-L22^-1 L21 L11^-1, L22^-1]]
 * (two dtrmm). Returns LAPACK's info (0: done). */
static int invert_factor(const gp_t *g, int n, double *L) {
    char lo = 'L', no = 'N', left = 'L', right = 'R';
    int info = 0, ld = n;
    double one = 1.0, minus_one = -1.0;
    for (int s = 0; s < n; s += TRI_LEAF) {
        int m = n - s < TRI_LEAF ? n - s : TRI_LEAF;
        g->trtri(&lo, &no, &m, L + s + (size_t)s * n, &ld, &info);
        if (info != 0) return info;
    }
    for (int size = TRI_LEAF; size < n; size *= 2) {
        for (int s = 0; s + size < n; s += 2 * size) {
            int t = s + size, rows = n - t < size ? n - t : size, cols = size;
            double *l21 = L + t + (size_t)s * n;
            g->trmm(&left, &lo, &no, &no, &rows, &cols, &minus_one, L + t + (size_t)t * n, &ld,
                    l21, &ld);
            g->trmm(&right, &lo, &no, &no, &rows, &cols, &one, L + s + (size_t)s * n, &ld, l21,
                    &ld);
        }
    }
    return 0;
}

/* C^-1 from its lower Cholesky factor L (column-major, leading dimension n), written over
 * L's triangle: LAPACK dpotri's result without dpotri, L^-1 (invert_factor), then dlauum
 * gives L^-T L^-1. Returns LAPACK's info (0: done). */
static int inverse_from_factor(const gp_t *g, int n, double *L) {
    char lo = 'L';
    int info = invert_factor(g, n, L), ld = n;
    if (info != 0) return info;
    g->lauum(&lo, &ld, L, &ld, &info);
    return info;
}

/* Each thread's workspace, kept between calls (nutpie calls the log density from one thread
 * per chain thousands of times: allocating 3 n^2 doubles per call costs an mmap and its page
 * faults each time) and freed when the thread ends. */
typedef struct {
    double *p;
    size_t size;
} workspace_t;

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;

static void ws_free(void *w) {
    workspace_t *ws = (workspace_t *)w;
    free(ws->p);
    free(ws);
}

static void ws_init(void) { pthread_key_create(&ws_key, ws_free); }

/* At least `size` doubles of this thread's workspace, or NULL. */
static double *workspace(size_t size) {
    pthread_once(&ws_once, ws_init);
    workspace_t *ws = (workspace_t *)pthread_getspecific(ws_key);
    if (!ws) {
        ws = (workspace_t *)calloc(1, sizeof(workspace_t));
        if (!ws) return NULL;
        if (pthread_setspecific(ws_key, ws) != 0) {
            free(ws);
            return NULL;
        }
    }
    if (ws->size < size) {
        free(ws->p);
        ws->p = (double *)malloc(sizeof(double) * size);
        ws->size = ws->p ? size : 0;
    }
    return ws->p;
}

/* e^x without a call into libm, so that the loops over a row vectorise: range reduction
 * x = k ln2 + r, |r| <= ln2/2, the degree-13 Taylor polynomial of e^r, and 2^k as two
 * power-of-two factors built from their bits (bayes_gp.kernels.vector_exp: within 1 ulp of
 * libm). k is rounded by the 1.5 * 2^52 shift, valid in the default rounding mode. Arguments
 * here are <= 0 (kernel exponents). */
static inline double exp_poly(double x) {
    const double log2e = 1.4426950408889634, ln2_hi = 6.93147180369123816490e-01,
                 ln2_lo = 1.90821492927058770002e-10, shift = 6755399441055744.0;
    x = x < -745.2 ? -745.2 : (x > 709.8 ? 709.8 : x);
    double t = x * log2e + shift;
    double k = t - shift;
    int64_t tb, sb;
    memcpy(&tb, &t, 8);
    memcpy(&sb, &shift, 8);
    int64_t ki = tb - sb;                /* the integer k */
    double r = (x - k * ln2_hi) - k * ln2_lo;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* 2^k = 2^k1 2^k2, k1 = floor(k/2) by a logical shift of the biased k (k >= -1075) */
    uint64_t kb = (uint64_t)(ki + 2046);
    uint64_t k1b = kb >> 1;             /* k1 + 1023 */
    uint64_t k2b = (uint64_t)(ki + 2046) - k1b; /* k2 + 1023 */
    uint64_t b1 = k1b << 52, b2 = k2b << 52;
    double two1, two2;
    memcpy(&two1, &b1, 8);
    memcpy(&two2, &b2, 8);
    return p * two1 * two2;
}

/* log(1 + u) for u >= 0, given inv = 1 / (1 + u), without a call into libm, so that the rational quadratic's loops
 * vectorise: z = 1 + u = 2^k m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) =
 * 2 (s + s^3/3 + ... + s^21/21), s = (m - 1)/(m + 1), |s| <= 0.1716 (the next term is below
 * 1e-17 relative), plus k ln 2 in two parts, and the rounding of 1 + u put back by
 * (u - (z - 1)) / z, so that the result keeps u's digits when u is small (the ratquad kernel
 * near its squared exponential limit, bayes_gp.kernels.RatQuad). Within a few ulp of libm's
 * log1p. */
static inline double log1p_poly(double u, double inv) {
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double z = 1.0 + u;
    double corr = (u - (z - 1.0)) * inv;
    int64_t zb;
    memcpy(&zb, &z, 8);
    int64_t k = (zb >> 52) - 1023;                 /* z >= 1: no sign bit, normal */
    int64_t mb = (zb & 0x000fffffffffffffLL) | 0x3ff0000000000000LL;
    double m;
    memcpy(&m, &mb, 8);                             /* z = 2^k m, m in [1, 2) */
    int big = m > 1.4142135623730951;
    m = big ? 0.5 * m : m;
    double kd = (double)(k + big);
    double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double p = 1.0 / 21.0;
    p = p * s2 + 1.0 / 19.0;
    p = p * s2 + 1.0 / 17.0;
    p = p * s2 + 1.0 / 15.0;
    p = p * s2 + 1.0 / 13.0;
    p = p * s2 + 1.0 / 11.0;
    p = p * s2 + 1.0 / 9.0;
    p = p * s2 + 1.0 / 7.0;
    p = p * s2 + 1.0 / 5.0;
    p = p * s2 + 1.0 / 3.0;
    double logm = 2.0 * s + 2.0 * s * s2 * p;
    return (kd * ln2_hi + (logm + (kd * ln2_lo + corr)));
}

/* The kernel k(r^2) over one row segment, and its derivative dk/d(r^2) into kp unless kp is
 * NULL (vectorised: each case one loop without a branch). */
#define KERNEL_LOOP(VALUE, DERIV)                                                            \
    if (kp) {                                                                                \
        for (int64_t j = 0; j < m; j++) {                                                    \
            const double r = r2[j];                                                          \
            VALUE;                                                                           \
            DERIV;                                                                           \
        }                                                                                    \
    } else {                                                                                 \
        for (int64_t j = 0; j < m; j++) {                                                    \
            const double r = r2[j];                                                          \
            VALUE;                                                                           \
        }                                                                                    \
    }

static void kernel_row(int64_t kind, int64_t m, const double *restrict r2, double *restrict k,
                       double *restrict kp) {
    switch (kind) {
    case K_EXPQUAD: /* dk/dr^2 = -k/2: factor_grad takes it from k */
        for (int64_t j = 0; j < m; j++) k[j] = exp_poly(-0.5 * r2[j]);
        break;
    case K_MATERN52:
        KERNEL_LOOP(const double s = sqrt(5.0 * r); const double e = exp_poly(-s);
                    k[j] = (1.0 + s + s * s / 3.0) * e, kp[j] = -(5.0 / 6.0) * (1.0 + s) * e)
        break;
    case K_MATERN32:
        KERNEL_LOOP(const double s = sqrt(3.0 * r); const double e = exp_poly(-s);
                    k[j] = (1.0 + s) * e, kp[j] = -1.5 * e)
        break;
    default: /* K_MATERN12: dk/dr^2 = -e / (2 s); at s = 0 every difference is 0, so is the
              * term (the inner test keeps the division finite in the vectorised loop) */
        KERNEL_LOOP(const double s = sqrt(r); const double e = exp_poly(-s); k[j] = e,
                    kp[j] = s > 0.0 ? -0.5 * e / (s > 0.0 ? s : 1.0) : 0.0)
        break;
    }
}
#undef KERNEL_LOOP

/* Prior log density of v = e^u in u, without the log-Jacobian u, and its derivative in u;
 * for P_NORMAL the density of u itself (a coordinate without a transform). */
/* Prior log density of v = e^u in u, without the log-Jacobian u, and its derivative in u;
 * for P_NORMAL the density of u itself (a coordinate without a transform). */
static double prior_logp(int64_t kind, double u, double a, double b, double c, double *du) {
    double v = exp(u);
    switch (kind) {
    case P_LOGNORMAL: { /* mu = a, sigma = b; c = -log(b) - log(2 pi)/2 */
        double z = (u - a) / b;
        *du = -z / b - 1.0;
        return c - 0.5 * z * z - u;
    }
    case P_HALFNORMAL: { /* sigma = a; c = log(2/pi)/2 - log(a) */
        double z = v / a;
        *du = -z * z;
        return c - 0.5 * z * z;
    }
    case P_GAMMA: /* shape a, rate b; c = a log b - lgamma(a) */
        *du = (a - 1.0) - b * v;
        return c + (a - 1.0) * u - b * v;
    case P_INVGAMMA: /* shape a, scale b; c = a log b - lgamma(a) */
        *du = -(a + 1.0) + b / v;
        return c - (a + 1.0) * u - b / v;
    case P_EXPONENTIAL: /* scale a; c = -log(a) */
        *du = -v / a;
        return c - v / a;
    case P_HALFCAUCHY: { /* scale a; c = log(2/pi) - log(a) */
        double z = v / a;
        *du = -2.0 * z * z / (1.0 + z * z);
        return c - log1p(z * z);
    }
    case P_NORMAL: { /* mu = a, sigma = b; c = -log(b) - log(2 pi)/2 */
        double z = (u - a) / b;
        *du = -z / b;
        return c - 0.5 * z * z;
    }
    default:
        *du = 0.0;
        return 0.0;
    }
}

/* This thread's workspace for one evaluation of a gp_t: A (n x n), alpha, a row of r^2, of
 * weights, of derivative weights and of a term's values (n each), the log-parameters and
 * their gradient (n_slot each), 1/ls^2 per factor and input (n_fac d), three rows per factor
 * (its values, dk/dr^2, dk/dlog extra) and per factor and input sin and cos of pi x / p
 * (periodic factors; 2 n each); then, where it takes at most CACHE_BYTES, the rows each
 * factor keeps (kept_rows) over the packed upper triangle (cache_size): assemble computes
 * them once for the gradient's pass, which otherwise computes them again. NULL if out of
 * memory. */
typedef struct {
    double *A, *alpha, *r2, *w, *wk, *tv, *theta, *dtheta, *il2, *kf, *sc, *cache;
    double *tab; /* with a lag table: the kernel at the lags, then the table's eval_t rows */
    double wd_tab; /* the diagonal's weights summed (table_grad) */
} eval_t;

#define CACHE_BYTES ((size_t)64 << 20)

/* The rows a factor keeps for the gradient: its values; dk/dr^2 too for the Matern kinds (the
 * squared exponential's is -k/2); and dk/dlog alpha too for the rational quadratic. */
static size_t kept_rows(int64_t kind) {
    return kind == K_RATQUAD ? 3 : (kind == K_EXPQUAD || kind == K_PERIODIC ? 1 : 2);
}

/* The cache's doubles: each factor's kept rows over the packed upper triangle (n (n - 1) / 2
 * pairs each), or 0 where that exceeds CACHE_BYTES. */
static size_t cache_size(const gp_t *g) {
    if (g->table) return 0;
    size_t pairs = (size_t)g->n * (size_t)(g->n - 1) / 2, rows = 0;
    for (int64_t f = 0; f < g->n_fac; f++) rows += kept_rows(g->fac_kind[f]);
    return rows * pairs * sizeof(double) <= CACHE_BYTES ? rows * pairs : 0;
}

/* The doubles a lag table takes: its kernel values and weights, and the rows of its eval_t
 * (table_eval). */
static size_t table_size(const gp_t *g) {
    if (!g->table) return 0;
    size_t n = (size_t)g->table->n, F = (size_t)g->n_fac;
    return 2 * n + 3 * n + 3 * F * n + 2 * F * n;
}

/* The doubles one evaluation of g takes (eval_t). */
static size_t eval_size(const gp_t *g) {
    size_t n = (size_t)g->n, F = (size_t)g->n_fac, d = (size_t)g->d;
    return n * n + 5 * n + 2 * (size_t)g->n_slot + F * d + 3 * F * n + 2 * F * d * n +
           cache_size(g) + table_size(g);
}

/* e's arrays laid out from w (eval_size(g) doubles); returns the first double after them. */
static double *eval_carve(const gp_t *g, double *w, eval_t *e) {
    size_t n = (size_t)g->n, F = (size_t)g->n_fac, d = (size_t)g->d;
    e->A = w;
    e->alpha = w + n * n;
    e->r2 = e->alpha + n;
    e->w = e->r2 + n;
    e->wk = e->w + n;
    e->tv = e->wk + n;
    e->theta = e->tv + n;
    e->dtheta = e->theta + g->n_slot;
    e->il2 = e->dtheta + g->n_slot;
    e->kf = e->il2 + F * d;
    e->sc = e->kf + 3 * F * n;
    double *end = e->sc + 2 * F * d * n;
    e->cache = cache_size(g) ? end : NULL;
    end += cache_size(g);
    e->tab = g->table ? end : NULL;
    return end + table_size(g);
}

/* The eval_t of g's lag table (its row 0 holds the lags 1..J): its own rows from e->tab, the
 * log-parameters, their gradient and 1/ls^2 shared with e. */
static void table_eval(const gp_t *g, const eval_t *e, eval_t *et) {
    const size_t n = (size_t)g->table->n, F = (size_t)g->n_fac;
    memset(et, 0, sizeof(*et));
    et->theta = e->theta;
    et->dtheta = e->dtheta;
    et->il2 = e->il2;
    et->r2 = e->tab + 2 * n;
    et->wk = et->r2 + n;
    et->tv = et->wk + n;
    et->kf = et->tv + n;
    et->sc = et->kf + 3 * F * n;
}

static int eval_space(const gp_t *g, eval_t *e) {
    double *w = workspace(eval_size(g));
    if (!w) return 0;
    eval_carve(g, w, e);
    return 1;
}

/* The log-parameters at x into e->theta (their gradient e->dtheta zeroed), 1/ls^2 of each
 * factor by input, and the periodic factors' sin and cos of pi x_d / p by point. */
static void kernel_prepare(const gp_t *g, const double *x, eval_t *e) {
    const int64_t n = g->n, d = g->d;
    for (int64_t p = 0; p < g->n_slot; p++) {
        int64_t src = g->slot_src[p];
        e->theta[p] = src >= 0 ? g->c->scale[src] * x[src] : g->slot_fixed[p];
        e->dtheta[p] = 0.0;
    }
    for (int64_t f = 0; f < g->n_fac; f++) {
        for (int64_t k = 0; k < d; k++)
            e->il2[f * d + k] = exp(-2.0 * e->theta[g->fac_ls[f] + (g->fac_nls[f] == 1 ? 0 : k)]);
        if (g->fac_kind[f] != K_PERIODIC) continue;
        double w = M_PI / exp(e->theta[g->fac_extra[f]]);
        for (int64_t k = 0; k < d; k++) {
            double *s = e->sc + (f * d + k) * 2 * n, *c = s + n;
            const double *xk = g->XT + k * n;
            /* angles from the inputs' midpoint: sin and cos of small arguments, so that
             * s_j c_i - c_j s_i keeps the digits of sin(pi (x_j - x_i) / p) */
            double lo = xk[0], hi = xk[0];
            for (int64_t j = 1; j < n; j++) {
                lo = xk[j] < lo ? xk[j] : lo;
                hi = xk[j] > hi ? xk[j] : hi;
            }
            const double mid = 0.5 * (lo + hi);
            for (int64_t j = 0; j < n; j++) {
                s[j] = sin(w * (xk[j] - mid));
                c[j] = cos(w * (xk[j] - mid));
            }
        }
    }
}

/* Factor f over row i's columns j > i (m of them): its values k and, where grad, dk/dr^2
 * into kp (stationary kinds) and dk/dlog alpha into ka (ratquad). sin(a_j - a_i) = s_j c_i -
 * c_j s_i for the periodic factor, from kernel_prepare's tables. */
static void factor_row(const gp_t *g, const eval_t *e, int64_t f, int64_t i, int grad,
                       double *restrict k, double *restrict kp, double *restrict ka) {
    const int64_t n = g->n, d = g->d, m = n - i - 1, kind = g->fac_kind[f];
    const double *il2 = e->il2 + f * d;
    double *restrict r2 = e->r2;
    if (kind == K_PERIODIC) {
        for (int64_t dd = 0; dd < d; dd++) {
            const double *restrict s = e->sc + (f * d + dd) * 2 * n, *restrict c = s + n;
            const double si = s[i], ci = c[i], w = 4.0 * il2[dd];
            if (dd == 0)
                for (int64_t j = 0; j < m; j++) {
                    double sn = s[i + 1 + j] * ci - c[i + 1 + j] * si;
                    r2[j] = sn * sn * w;
                }
            else
                for (int64_t j = 0; j < m; j++) {
                    double sn = s[i + 1 + j] * ci - c[i + 1 + j] * si;
                    r2[j] += sn * sn * w;
                }
        }
        for (int64_t j = 0; j < m; j++) k[j] = exp_poly(-0.5 * r2[j]);
        return;
    }
    for (int64_t dd = 0; dd < d; dd++) {
        const double *restrict col = g->XT + dd * n + i + 1;
        const double xi = col[-1], w = il2[dd];
        if (dd == 0)
            for (int64_t j = 0; j < m; j++) {
                double diff = col[j] - xi;
                r2[j] = diff * diff * w;
            }
        else
            for (int64_t j = 0; j < m; j++) {
                double diff = col[j] - xi;
                r2[j] += diff * diff * w;
            }
    }
    if (kind == K_RATQUAD) {
        const double alpha = exp(e->theta[g->fac_extra[f]]), h = 0.5 / alpha;
        if (!grad) {
            for (int64_t j = 0; j < m; j++) {
                double u = r2[j] * h;
                k[j] = exp_poly(-alpha * log1p_poly(u, 1.0 / (1.0 + u)));
            }
            return;
        }
        for (int64_t j = 0; j < m; j++) {
            double u = r2[j] * h, inv = 1.0 / (1.0 + u), l = log1p_poly(u, inv);
            double kv = exp_poly(-alpha * l);
            k[j] = kv;
            kp[j] = -0.5 * kv * inv;
            ka[j] = alpha * kv * (u * inv - l);
        }
        return;
    }
    kernel_row(kind, m, r2, k, grad ? kp : NULL);
}

/* scale times the derivative of sum_j wk_j k_f(x_i, x_{i+1+j}) in factor f's
 * log-parameters, added to e->dtheta, with k, kp and ka its row (factor_row):
 *   d/dlog ls_d = sum_j wk_j dk/dr^2 (-2 (x_d - x'_d)^2 / ls_d^2)            (stationary)
 *   d/dlog ls_d = sum_j wk_j k 4 sin^2(a) / ls_d^2,
 *   d/dlog p = sum_j wk_j k sum_d 4 sin(a) cos(a) a / ls_d^2, a = pi (x_d - x'_d)/p (periodic)
 *   d/dlog alpha = sum_j wk_j dk/dlog alpha                                  (ratquad) */
static void factor_grad(const gp_t *g, eval_t *e, int64_t f, int64_t i,
                        const double *restrict wk, double scale, const double *restrict k,
                        const double *restrict kp, const double *restrict ka) {
    const int64_t n = g->n, d = g->d, m = n - i - 1, kind = g->fac_kind[f];
    const int64_t ls = g->fac_ls[f], iso = g->fac_nls[f] == 1;
    const double *il2 = e->il2 + f * d;
    double *dt = e->dtheta;
    if (kind == K_PERIODIC) {
        const double w = M_PI / exp(e->theta[g->fac_extra[f]]);
        double gp = 0.0;
        for (int64_t dd = 0; dd < d; dd++) {
            const double *s = e->sc + (f * d + dd) * 2 * n, *c = s + n;
            const double *col = g->XT + dd * n + i + 1;
            const double si = s[i], ci = c[i], xi = col[-1];
            double a_ls = 0.0, a_p = 0.0;
            for (int64_t j = 0; j < m; j++) {
                double sn = s[i + 1 + j] * ci - c[i + 1 + j] * si;
                double cs = c[i + 1 + j] * ci + s[i + 1 + j] * si;
                double t = wk[j] * k[j];
                a_ls += t * sn * sn;
                a_p += t * sn * cs * (col[j] - xi);
            }
            dt[ls + (iso ? 0 : dd)] += 4.0 * scale * a_ls * il2[dd];
            gp += 4.0 * a_p * w * il2[dd];
        }
        dt[g->fac_extra[f]] += scale * gp;
        return;
    }
    const double *restrict dk = kind == K_EXPQUAD ? k : kp; /* dk/dr^2, or k: */
    const double c = kind == K_EXPQUAD ? -0.5 : 1.0;          /* dk/dr^2 = -k/2 */
    for (int64_t dd = 0; dd < d; dd++) {
        const double *col = g->XT + dd * n + i + 1;
        const double xi = col[-1];
        double s = 0.0;
        for (int64_t j = 0; j < m; j++) {
            double diff = col[j] - xi;
            s += wk[j] * dk[j] * diff * diff;
        }
        dt[ls + (iso ? 0 : dd)] += -2.0 * c * scale * s * il2[dd];
    }
    if (kind == K_RATQUAD) {
        double s = 0.0;
        for (int64_t j = 0; j < m; j++) s += wk[j] * ka[j];
        dt[g->fac_extra[f]] += scale * s;
    }
}

/* Factor f's rows for row i (values, dk/dr^2, dk/dlog extra; *stride apart): in the cache
 * (packed upper triangle, kept_rows of them), or the scratch rows. */
static double *factor_rows(const gp_t *g, const eval_t *e, int64_t f, int64_t i, size_t *stride) {
    const size_t n = (size_t)g->n, pairs = n * (n - 1) / 2;
    if (!e->cache) {
        *stride = n;
        return e->kf + 3 * (size_t)f * n;
    }
    size_t before = 0;
    for (int64_t o = 0; o < f; o++) before += kept_rows(g->fac_kind[o]);
    *stride = pairs;
    return e->cache + before * pairs + (size_t)i * n - (size_t)i * (size_t)(i + 1) / 2;
}

/* Term t's factors over row i, with their derivatives where grad (factor_row, into
 * factor_rows; with the cache, assemble computes them with their derivatives and the
 * gradient's pass reads them); returns their product prod_f k_f, the first factor's row
 * itself where the term has one (else e->tv). */
static const double *term_row(const gp_t *g, eval_t *e, int64_t t, int64_t i, int grad) {
    const int64_t n = g->n, m = n - i - 1, f0 = g->term_first[t], f1 = g->term_first[t + 1];
    size_t st;
    if (!(grad && e->cache))
        for (int64_t f = f0; f < f1; f++) {
            double *k = factor_rows(g, e, f, i, &st);
            factor_row(g, e, f, i, grad || e->cache, k, k + st, k + 2 * st);
        }
    const double *k0 = factor_rows(g, e, f0, i, &st);
    if (f1 - f0 == 1) return k0;
    double *restrict tv = e->tv;
    const double *restrict k1 = factor_rows(g, e, f0 + 1, i, &st);
    for (int64_t j = 0; j < m; j++) tv[j] = k0[j] * k1[j];
    for (int64_t f = f0 + 2; f < f1; f++) {
        const double *restrict k = factor_rows(g, e, f, i, &st);
        for (int64_t j = 0; j < m; j++) tv[j] *= k[j];
    }
    return tv;
}

/* C's row-major upper triangle (LAPACK's 'L' of the column-major view: OpenBLAS factors and
 * inverts it faster than 'U') over e->A at x: row i holds the columns j > i from its diagonal
 * on, each segment contiguous (every factor is 1 at r = 0). Returns sigma (0 without noise). */
static double assemble(const gp_t *g, const double *x, eval_t *e) {
    const int64_t n = g->n;
    kernel_prepare(g, x, e);
    const double sigma = g->slot_sigma >= 0 ? exp(e->theta[g->slot_sigma]) : 0.0;
    double diag = sigma * sigma + g->jitter, k0 = 0.0;
    for (int64_t t = 0; t < g->n_term; t++) k0 += exp(2.0 * e->theta[g->term_eta[t]]);
    diag += k0;
    if (g->table) { /* the kernel at the lags, K gathered from it */
        const gp_t *tg = g->table;
        const int64_t nl = tg->n;
        eval_t et;
        table_eval(g, e, &et);
        kernel_prepare(tg, x, &et);
        double *ktab = e->tab;
        ktab[0] = k0;
        for (int64_t l = 1; l < nl; l++) ktab[l] = 0.0;
        for (int64_t t = 0; t < g->n_term; t++) {
            const double *restrict prod = term_row(tg, &et, t, 0, 0);
            const double eta2 = exp(2.0 * e->theta[g->term_eta[t]]);
            for (int64_t l = 1; l < nl; l++) ktab[l] += eta2 * prod[l - 1];
        }
        const int64_t *grid = g->grid;
        for (int64_t i = 0; i < n; i++) {
            double *restrict arow = e->A + i * n + i + 1;
            const int64_t gi = grid[i], *gj = grid + i + 1;
            for (int64_t j = 0; j < n - i - 1; j++) {
                int64_t l = gj[j] - gi;
                arow[j] = ktab[l < 0 ? -l : l];
            }
            e->A[i * n + i] = diag;
        }
        return sigma;
    }
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = n - i - 1;
        double *arow = e->A + i * n + i + 1;
        for (int64_t j = 0; j < m; j++) arow[j] = 0.0;
        for (int64_t t = 0; t < g->n_term; t++) {
            const double *restrict prod = term_row(g, e, t, i, 0);
            const double eta2 = exp(2.0 * e->theta[g->term_eta[t]]);
            for (int64_t j = 0; j < m; j++) arow[j] += eta2 * prod[j];
        }
        e->A[i * n + i] = diag;
    }
    return sigma;
}

/* Row i's share of the derivative of sum_ij W_ij K_ij in the log-parameters, added to
 * e->dtheta: w[j] = 2 W_{i,i+1+j} (the off-diagonal terms count twice), wd = W_ii.
 * d/dlog eta_t = sum W 2 K_t; a factor's parameters get its own derivative weighted by w
 * times eta_t^2 and the term's other factors (factor_grad). */
static void kernel_grad_row(const gp_t *g, eval_t *e, int64_t i, const double *w, double wd) {
    const int64_t n = g->n, m = n - i - 1;
    double *restrict wk = e->wk;
    for (int64_t t = 0; t < g->n_term; t++) {
        const int64_t f0 = g->term_first[t], f1 = g->term_first[t + 1];
        const double *restrict prod = term_row(g, e, t, i, 1);
        const double eta2 = exp(2.0 * e->theta[g->term_eta[t]]);
        double s = 0.0;
        for (int64_t j = 0; j < m; j++) s += w[j] * prod[j];
        e->dtheta[g->term_eta[t]] += 2.0 * eta2 * (s + wd);
        for (int64_t f = f0; f < f1; f++) {
            size_t st;
            const double *k = factor_rows(g, e, f, i, &st);
            if (f1 - f0 == 1) { /* the weights themselves */
                factor_grad(g, e, f, i, w, eta2, k, k + st, k + 2 * st);
                continue;
            }
            int first = 1;
            for (int64_t o = f0; o < f1; o++) {
                if (o == f) continue;
                size_t so;
                const double *restrict ko = factor_rows(g, e, o, i, &so);
                if (first)
                    for (int64_t j = 0; j < m; j++) wk[j] = w[j] * ko[j];
                else
                    for (int64_t j = 0; j < m; j++) wk[j] *= ko[j];
                first = 0;
            }
            factor_grad(g, e, f, i, wk, eta2, k, k + st, k + 2 * st);
        }
    }
}

/* Row i's weights of the derivative of sum_ij W_ij K_ij (kernel_grad_row's w and wd): into
 * the kernel's gradient, or with a lag table summed into its lags (table_grad ends it). */
static void grad_row(const gp_t *g, eval_t *e, int64_t i, const double *w, double wd) {
    if (!g->table) {
        kernel_grad_row(g, e, i, w, wd);
        return;
    }
    double *wl = e->tab + g->table->n;
    if (i == 0) {
        for (int64_t l = 0; l < g->table->n; l++) wl[l] = 0.0;
        e->wd_tab = 0.0;
    }
    const int64_t n = g->n, gi = g->grid[i], *gj = g->grid + i + 1;
    for (int64_t j = 0; j < n - i - 1; j++) {
        int64_t l = gj[j] - gi;
        wl[l < 0 ? -l : l] += w[j];
    }
    e->wd_tab += wd;
}

/* After grad_row's last row: the lag table's weights (lag 0's with the diagonal's, where
 * every factor is 1) through the table's row 0 into e->dtheta. */
static void table_grad(const gp_t *g, eval_t *e) {
    if (!g->table) return;
    eval_t et;
    table_eval(g, e, &et);
    const double *wl = e->tab + g->table->n;
    kernel_grad_row(g->table, &et, 0, wl + 1, e->wd_tab + wl[0]);
}

/* The gradient in the log-parameters (e->dtheta) added to grad at their coordinates. */
static void slots_to_grad(const gp_t *g, const eval_t *e, double *grad) {
    for (int64_t p = 0; p < g->n_slot; p++) {
        int64_t src = g->slot_src[p];
        if (src >= 0) grad[src] += g->c->scale[src] * e->dtheta[p];
    }
}

/* C = LL' over A (dpotrf), alpha = C^-1 y by the two triangular solves, each a contiguous
 * loop over a row of A (row i from the diagonal holds L's column i; OpenBLAS's dpotrs for
 * one right-hand side took 3-5x longer), and log|C|. Returns LAPACK's info (0: done). */
static int factor_solve(const gp_t *g, eval_t *e, double *logdet) {
    const int64_t n = g->n;
    int ni = (int)n, info = 0;
    char lo = 'L';
    double *A = e->A, *alpha = e->alpha;
    g->potrf(&lo, &ni, A, &ni, &info);
    if (info != 0) return info;
    double ld = 0.0;
    for (int64_t i = 0; i < n; i++) ld += log(A[i * n + i]);
    *logdet = 2.0 * ld;
    memcpy(alpha, g->y, sizeof(double) * n);
    for (int64_t i = 0; i < n; i++) { /* L z = y, column by column */
        const double *lcol = A + i * n;
        double zi = alpha[i] / lcol[i];
        alpha[i] = zi;
        for (int64_t j = i + 1; j < n; j++) alpha[j] -= lcol[j] * zi;
    }
    for (int64_t i = n - 1; i >= 0; i--) { /* L' alpha = z */
        const double *lcol = A + i * n;
        double s = 0.0;
        for (int64_t j = i + 1; j < n; j++) s += lcol[j] * alpha[j];
        alpha[i] = (alpha[i] - s) / lcol[i];
    }
    return 0;
}

/* The priors of the coordinates of x and their transforms' log-Jacobians (theta = s u: s u +
 * log s; none for P_NORMAL, the one untransformed kind): their sum, and their gradient
 * written into grad. */
static double priors(const coords_t *c, const double *x, double *grad) {
    double lp = 0.0;
    for (int64_t i = 0; i < c->n_free; i++) {
        double du = 0.0;
        if (c->prior_kind[i] == P_NORMAL) {
            lp += prior_logp(P_NORMAL, x[i], c->prior_a[i], c->prior_b[i], c->prior_c[i], &du);
            grad[i] = du;
            continue;
        }
        const double s = c->scale[i], u = s * x[i];
        lp += prior_logp(c->prior_kind[i], u, c->prior_a[i], c->prior_b[i], c->prior_c[i], &du);
        lp += u + (s == 1.0 ? 0.0 : log(s));
        grad[i] = (du + 1.0) * s;
    }
    return lp;
}

/* log N(y | 0, C) (R&W eq. 2.30) added to *lp and its gradient in the log-hyperparameters of
 * g added to grad (R&W eq. 5.9), C assembled at x with extra_diag (n, or NULL) added to its
 * diagonal; where wdiag is not NULL, wdiag[i] = alpha_i^2 - [C^-1]_ii, twice the derivative
 * of the log density in C_ii. Returns 0, or 4 where C is not positive definite. */
static int exact_logp(const gp_t *g, const double *x, eval_t *e, const double *extra_diag,
                      double *lp, double *grad, double *wdiag) {
    const int64_t n = g->n;
    double sigma = assemble(g, x, e), logdet = 0.0;
    if (extra_diag)
        for (int64_t i = 0; i < n; i++) e->A[i * n + i] += extra_diag[i];
    if (factor_solve(g, e, &logdet) != 0) return 4;
    const double *A = e->A, *alpha = e->alpha;
    double quad = 0.0;
    for (int64_t i = 0; i < n; i++) quad += g->y[i] * alpha[i];
    *lp += -0.5 * quad - 0.5 * logdet - 0.5 * (double)n * log(2.0 * M_PI);
    if (inverse_from_factor(g, (int)n, e->A) != 0) return 4; /* C^-1, upper (row-major) */

    /* R&W eq. 5.9 over the upper triangle, W = (alpha alpha' - C^-1) / 2:
     * d/dlog sigma = sum_i W_ii 2 sigma^2, the kernel's parameters by kernel_grad_row */
    double g_sigma = 0.0, *w = e->w;
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = n - i - 1;
        const double *crow = A + i * n + i + 1, *aj = alpha + i + 1, ai = alpha[i];
        for (int64_t j = 0; j < m; j++) w[j] = ai * aj[j] - crow[j];
        double wii = 0.5 * (ai * ai - A[i * n + i]);
        if (wdiag) wdiag[i] = 2.0 * wii;
        g_sigma += wii * 2.0 * sigma * sigma;
        grad_row(g, e, i, w, wii);
    }
    table_grad(g, e);
    if (g->slot_sigma >= 0) e->dtheta[g->slot_sigma] += g_sigma;
    slots_to_grad(g, e, grad);
    return 0;
}

/* logp and the finiteness checks that end every log density: 3 for a non-finite gradient,
 * 4 for a non-finite log density, else 0. */
static int64_t finish(int64_t n_free, const double *grad, double lp, double *logp) {
    *logp = lp;
    for (int64_t i = 0; i < n_free; i++)
        if (!isfinite(grad[i])) return 3;
    return isfinite(lp) ? 0 : 4;
}

int64_t gp_logp(uint64_t dim, const double *x, double *grad, double *logp, void *data) {
    const gp_t *g = (const gp_t *)data;
    if ((int64_t)dim != g->c->n_free) return -1;
    eval_t e;
    if (!eval_space(g, &e)) return 1;
    double lp = priors(g->c, x, grad);
    *logp = -INFINITY;
    if (exact_logp(g, x, &e, NULL, &lp, grad, NULL) != 0) return 4;
    return finish(g->c->n_free, grad, lp, logp);
}

/* The priors' part of a type-II objective at x: where with_prior, the priors' log densities of
 * the hyperparameters' values without the transforms' log-Jacobians (PyMC's
 * logp(jacobian=False)), with their gradient written into grad; else 0 and a zero grad. */
static double objective_priors(const coords_t *c, const double *x, int64_t with_prior,
                               double *grad) {
    if (!with_prior) {
        for (int64_t i = 0; i < c->n_free; i++) grad[i] = 0.0;
        return 0.0;
    }
    double lp = priors(c, x, grad);
    for (int64_t i = 0; i < c->n_free; i++) { /* without the log-Jacobians */
        if (c->prior_kind[i] == P_NORMAL) continue;
        const double s = c->scale[i];
        lp -= s * x[i] + (s == 1.0 ? 0.0 : log(s));
        grad[i] -= s;
    }
    return lp;
}

/* A type-II objective (bayes_gp.inference.typeii.optimize) at the coordinates x: the log
 * marginal likelihood (R&W eq. 2.30) plus objective_priors into *value, and its gradient in x.
 * Returns 0, 1 when memory could not be allocated, 3 or 4 as gp_logp. */
int64_t gp_objective(const gp_t *g, const double *x, int64_t with_prior, double *grad,
                     double *value) {
    const coords_t *c = g->c;
    eval_t e;
    if (!eval_space(g, &e)) return 1;
    double lp = objective_priors(c, x, with_prior, grad);
    *value = -INFINITY;
    if (exact_logp(g, x, &e, NULL, &lp, grad, NULL) != 0) return 4;
    return finish(c->n_free, grad, lp, value);
}

/* The exact leave-one-out log predictive densities of `draws` draws (R&W eqs. 5.10-5.12):
 * log p(y_i | y_-i) = -log(s_i^2)/2 - (alpha_i s_i^2)^2 / (2 s_i^2) - log(2 pi)/2 with
 * s_i^2 = 1 / [C^-1]_ii, at the coordinates x (draws x n_free), into out (draws x n).
 * A draw whose C is not positive definite, or whose terms are not finite, gets NaN in its
 * row (the caller repeats it with its jitter retry). Returns the number of such draws, or -1
 * when memory could not be allocated. */
int64_t gp_loo(const gp_t *g, int64_t draws, const double *x, double *out) {
    const int64_t n = g->n;
    eval_t e;
    if (!eval_space(g, &e)) return -1;
    int64_t failed = 0;
    for (int64_t k = 0; k < draws; k++) {
        double *row = out + k * n, logdet = 0.0;
        int ok = 1;
        assemble(g, x + k * g->c->n_free, &e);
        if (factor_solve(g, &e, &logdet) != 0 || inverse_from_factor(g, (int)n, e.A) != 0) ok = 0;
        for (int64_t i = 0; ok && i < n; i++) {
            double var = 1.0 / e.A[i * n + i], r = e.alpha[i] * var;
            row[i] = -0.5 * log(var) - 0.5 * r * r / var - 0.5 * log(2.0 * M_PI);
            if (!isfinite(row[i])) ok = 0;
        }
        if (!ok) {
            for (int64_t i = 0; i < n; i++) row[i] = NAN;
            failed++;
        }
    }
    return failed;
}

/* nutpie's stored values that are coordinates: out[k] = x[src[k]], or the value of that
 * coordinate's variable, exp(scale u), where use_exp[k], for k < n_head. */
static void expand_head(const coords_t *c, const double *x, double *out) {
    for (int64_t k = 0; k < c->n_head; k++) {
        int64_t src = c->expand_src[k];
        double u = x[src];
        out[k] = c->expand_exp[k] ? exp(c->scale[src] * u) : u;
    }
}

int64_t gp_expand(uint64_t dim, uint64_t expanded, const double *x, double *out, void *data) {
    const gp_t *g = (const gp_t *)data;
    if ((int64_t)dim != g->c->n_free || (int64_t)expanded != g->c->n_head) return -1;
    expand_head(g->c, x, out);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * The heteroscedastic GP (bayes_gp.HeteroscedasticGPRegression; Goldberg, Williams & Bishop
 * 1998) as bayes_gp.inference.native_gp describes it in a het_t: f integrated out,
 *   y - m ~ N(0, C),  C = K_f + diag(e^{2 g}) + jitter_f I                   (R&W eq. 2.30)
 * and the log noise sd g whitened (pm.gp.Latent(reparameterize=True)):
 *   g = mu_g + L_g z,  L_g L_g' = K_g + jitter_g I,  z ~ N(0, I).
 * With W2_ii = alpha_i^2 - [C^-1]_ii (exact_logp's wdiag), the log density's derivative in g is
 *   gbar_i = W2_ii e^{2 g_i}
 * so d/dmu_g = sum_i gbar_i and d/dz = L_g' gbar. Through the Cholesky factor (reverse mode,
 * Murray 2016, "Differentiation of the Cholesky decomposition", arXiv:1602.07527): with
 * Lbar = tril(gbar z') and Phi the lower triangle with its diagonal halved,
 *   Kbar_g = L_g^-T sym(Phi(L_g' Lbar)) L_g^-1,  sym(S) = (S + S') / 2,
 * and Phi(L_g' Lbar) = Phi(v z') with v = L_g' gbar (L_g' Lbar is v z' on and below the
 * diagonal). Then d/dtheta_g = sum_ij Kbar_ij dK_g,ij/dtheta_g. */
typedef struct {
    int64_t n, off_mean, off_z; /* off_mean -1: mu_g fixed */
    double mean_fixed;
    const coords_t *c;  /* nutpie's stored values: c->n_head of them, then g */
    const gp_t *f, *g; /* K_f (its y: y - m; no sigma) and K_g (its y unused) */
} het_t;

/* The workspace of one evaluation: f's and g's eval_t, then g, gbar, v and Kbar (n x n). */
typedef struct {
    eval_t ef, eg;
    double *gv, *gbar, *v, *B;
} het_eval_t;

static int het_space(const het_t *h, het_eval_t *e) {
    size_t n = (size_t)h->n;
    double *w = workspace(eval_size(h->f) + eval_size(h->g) + 3 * n + n * n);
    if (!w) return 0;
    w = eval_carve(h->g, eval_carve(h->f, w, &e->ef), &e->eg);
    e->gv = w;
    e->gbar = w + n;
    e->v = w + 2 * n;
    e->B = w + 3 * n;
    return 1;
}

/* g = mu + L z at x (mu: x[off_mean], or mean_fixed where off_mean < 0; z: x from off_z),
 * L = chol(K + jitter I) of gg over e->A (column-major lower), into gv. Returns 0, or 4 where
 * K + jitter I is not positive definite. */
static int whitened_latent(const gp_t *gg, int64_t off_mean, double mean_fixed, int64_t off_z,
                           const double *x, eval_t *e, double *gv) {
    const int64_t n = gg->n;
    int ni = (int)n, info = 0;
    char lo = 'L';
    assemble(gg, x, e);
    gg->potrf(&lo, &ni, e->A, &ni, &info);
    if (info != 0) return 4;
    const double mu = off_mean >= 0 ? x[off_mean] : mean_fixed, *z = x + off_z;
    for (int64_t i = 0; i < n; i++) gv[i] = mu;
    for (int64_t j = 0; j < n; j++) { /* column j of L: contiguous from its diagonal on */
        const double *lcol = e->A + j * n, zj = z[j];
        for (int64_t i = j; i < n; i++) gv[i] += lcol[i] * zj;
    }
    return 0;
}

/* The gradient of a log density through g = mu + L z (whitened_latent, L still over e->A),
 * given gbar = its derivative in g: added to grad at off_mean (sum gbar), at off_z (L' gbar)
 * and at the log-hyperparameters of gg, through the Cholesky factor's reverse mode (the
 * comment above het_t). v (n) and B (n x n) are workspace; L is overwritten by L^-1.
 * Returns 0, or 4 where L cannot be inverted. */
static int whitened_backward(const gp_t *gg, int64_t off_mean, int64_t off_z, const double *x,
                             const double *gbar, eval_t *e, double *v, double *B,
                             double *grad) {
    const int64_t n = gg->n;
    double *L = e->A;
    const double *z = x + off_z;
    if (off_mean >= 0) {
        double s = 0.0;
        for (int64_t i = 0; i < n; i++) s += gbar[i];
        grad[off_mean] += s;
    }
    for (int64_t j = 0; j < n; j++) { /* v = L' gbar: column j of L against gbar */
        const double *lcol = L + j * n;
        double s = 0.0;
        for (int64_t i = j; i < n; i++) s += lcol[i] * gbar[i];
        v[j] = s;
        grad[off_z + j] += s;
    }

    /* M = L^-1 over L (column-major lower), B = (Phi(v z') + Phi(v z')') M column by column:
     * B_ik = v_i P_ik + z_i (Q_k - R_ik) for i >= k, z_i Q_k for i < k, with
     * P_ik = sum_{k<=j<=i} z_j M_jk, R_ik = sum_{k<=j<=i} v_j M_jk, Q_k = sum_{j>=k} v_j M_jk;
     * then Kbar = M' B / 2 (dtrmm). */
    if (invert_factor(gg, (int)n, L) != 0) return 4;
    for (int64_t k = 0; k < n; k++) {
        const double *mcol = L + k * n;
        double *bcol = B + k * n, q = 0.0, p = 0.0, r = 0.0;
        for (int64_t j = k; j < n; j++) q += v[j] * mcol[j];
        for (int64_t i = 0; i < k; i++) bcol[i] = z[i] * q;
        for (int64_t i = k; i < n; i++) {
            p += z[i] * mcol[i];
            r += v[i] * mcol[i];
            bcol[i] = v[i] * p + z[i] * (q - r);
        }
    }
    {
        char left = 'L', lo = 'L', tr = 'T', no = 'N';
        int ni = (int)n;
        double half = 0.5;
        gg->trmm(&left, &lo, &tr, &no, &ni, &ni, &half, L, &ni, B, &ni);
    }
    /* the kernel's parameters: sum_ij Kbar_ij dK_ij/dtheta over the upper triangle (row-major)
     * with the two halves of Kbar averaged (kernel_grad_row) */
    double *w = e->w;
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = n - i - 1, o = i * n + i + 1;
        for (int64_t j = 0; j < m; j++) w[j] = B[o + j] + B[(i + 1 + j) * n + i]; /* 2 Kbar_ij */
        grad_row(gg, e, i, w, B[i * n + i]);
    }
    table_grad(gg, e);
    slots_to_grad(gg, e, grad);
    return 0;
}

static int het_latent(const het_t *h, const double *x, het_eval_t *e) {
    return whitened_latent(h->g, h->off_mean, h->mean_fixed, h->off_z, x, &e->eg, e->gv);
}

int64_t het_logp(uint64_t dim, const double *x, double *grad, double *logp, void *data) {
    const het_t *h = (const het_t *)data;
    if ((int64_t)dim != h->c->n_free) return -1;
    const int64_t n = h->n;
    het_eval_t e;
    if (!het_space(h, &e)) return 1;
    double lp = priors(h->c, x, grad);
    *logp = -INFINITY;
    if (het_latent(h, x, &e) != 0) return 4;
    double *gbar = e.gbar, *v = e.v;
    for (int64_t i = 0; i < n; i++) v[i] = exp(2.0 * e.gv[i]); /* the noise variances */
    if (exact_logp(h->f, x, &e.ef, v, &lp, grad, gbar) != 0) return 4;
    for (int64_t i = 0; i < n; i++) gbar[i] *= v[i];
    if (whitened_backward(h->g, h->off_mean, h->off_z, x, gbar, &e.eg, v, e.B, grad) != 0)
        return 4;
    return finish(h->c->n_free, grad, lp, logp);
}

/* nutpie's stored values: the coordinates (expand_src, exp() where expand_exp), then g. */
int64_t het_expand(uint64_t dim, uint64_t expanded, const double *x, double *out, void *data) {
    const het_t *h = (const het_t *)data;
    const int64_t n = h->n, head = h->c->n_head;
    if ((int64_t)dim != h->c->n_free || (int64_t)expanded != head + n) return -1;
    het_eval_t e;
    if (!het_space(h, &e)) return 1;
    expand_head(h->c, x, out);
    if (het_latent(h, x, &e) != 0) return 4;
    memcpy(out + head, e.gv, sizeof(double) * n);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * A latent GP under a Bernoulli, binomial or Poisson likelihood, sampled jointly with its
 * hyperparameters (bayes_gp.LatentGP / GPClassifier with method="nuts_joint"), the latent
 * values whitened as above: f = mu + L z, L L' = K + jitter I, z ~ N(0, I), and
 *   logit link (Bernoulli, binomial of m_i trials):  log p(y_i | f_i) = y_i f_i
 *       - m_i log(1 + e^{f_i}) + c_i,  d/df_i = y_i - m_i sigmoid(f_i);
 *   log link (Poisson of exposure m_i):             log p(y_i | f_i) = y_i f_i
 *       - m_i e^{f_i} + c_i,          d/df_i = y_i - m_i e^{f_i};
 * c_i the terms without f (log binomial coefficients; y_i log m_i - log y_i!). */
enum { LINK_LOGIT = 0, LINK_LOG = 1 };

typedef struct {
    int64_t n, off_mean, off_z, link; /* off_mean -1: mu fixed */
    double mean_fixed;
    const coords_t *coords;                    /* stored values: coords->n_head, then f */
    const double *y, *m, *c;                   /* n each */
    const gp_t *g;                             /* the kernel of f (its y unused) */
} lat_t;

typedef struct {
    eval_t e;
    double *f, *fbar, *v, *B;
} lat_eval_t;

static int lat_space(const lat_t *l, lat_eval_t *e) {
    size_t n = (size_t)l->n;
    double *w = workspace(eval_size(l->g) + 3 * n + n * n);
    if (!w) return 0;
    w = eval_carve(l->g, w, &e->e);
    e->f = w;
    e->fbar = w + n;
    e->v = w + 2 * n;
    e->B = w + 3 * n;
    return 1;
}

int64_t lat_logp(uint64_t dim, const double *x, double *grad, double *logp, void *data) {
    const lat_t *l = (const lat_t *)data;
    if ((int64_t)dim != l->coords->n_free) return -1;
    const int64_t n = l->n;
    lat_eval_t e;
    if (!lat_space(l, &e)) return 1;
    double lp = priors(l->coords, x, grad);
    *logp = -INFINITY;
    if (whitened_latent(l->g, l->off_mean, l->mean_fixed, l->off_z, x, &e.e, e.f) != 0) return 4;
    const double *y = l->y, *m = l->m;
    for (int64_t i = 0; i < n; i++) {
        double f = e.f[i];
        if (l->link == LINK_LOGIT) {
            double t = exp(-fabs(f)); /* softplus(f) = max(f, 0) + log(1 + e^{-|f|}) */
            double sig = f >= 0.0 ? 1.0 / (1.0 + t) : t / (1.0 + t);
            lp += y[i] * f - m[i] * ((f > 0.0 ? f : 0.0) + log1p(t)) + l->c[i];
            e.fbar[i] = y[i] - m[i] * sig;
        } else {
            double mu = m[i] * exp(f);
            lp += y[i] * f - mu + l->c[i];
            e.fbar[i] = y[i] - mu;
        }
    }
    if (whitened_backward(l->g, l->off_mean, l->off_z, x, e.fbar, &e.e, e.v, e.B, grad) != 0)
        return 4;
    return finish(l->coords->n_free, grad, lp, logp);
}

/* nutpie's stored values: the coordinates (expand_src, exp() where expand_exp), then f. */
int64_t lat_expand(uint64_t dim, uint64_t expanded, const double *x, double *out, void *data) {
    const lat_t *l = (const lat_t *)data;
    const int64_t n = l->n, head = l->coords->n_head;
    if ((int64_t)dim != l->coords->n_free || (int64_t)expanded != head + n) return -1;
    lat_eval_t e;
    if (!lat_space(l, &e)) return 1;
    expand_head(l->coords, x, out);
    if (whitened_latent(l->g, l->off_mean, l->mean_fixed, l->off_z, x, &e.e, e.f) != 0)
        return 4;
    memcpy(out + head, e.f, sizeof(double) * n);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * The Laplace-approximate marginal likelihood of a latent GP (its own file; bayes_gp.
 * inference.native_gp keys the compiled library by every source of this directory). */
#include "laplace.c"
