/* The Laplace approximation of a latent GP, its log evidence and gradient, for nuts-rs: the
 * latent values integrated out inside NUTS over the hyperparameters (bayes_gp.LatentGP and
 * GPClassifier with method="nuts"), included by exact_gp.c (its kernels, priors, workspace
 * and LAPACK pointers).
 *
 * Model: f ~ N(mu 1, K), K = sum_t eta_t^2 prod_f k_f + jitter I (exact_gp.c's gp_t, no noise),
 * with one of the log-concave likelihoods of bayes_gp.latent.native (its codes):
 *   LAP_BERNOULLI (logit link, a1 = 1):  l_i = -log(1 + e^{-s_i f_i}), s_i = 2 y_i - 1
 *                                       (R&W eq. 3.15)
 *   LAP_BINOMIAL (a1 the trials N_i, a2 log C(N_i, y_i)):  l_i = a2_i + y_i f_i
 *                                       - N_i log(1 + e^{f_i})
 *   LAP_POISSON (a1 the log exposure, a2 -log y_i!):  l_i = a2_i + y_i eta_i - e^{eta_i},
 *                                       eta_i = f_i + a1_i
 * and two with a parameter phi (bayes_gp.latent.likelihoods' formulas):
 *   LAP_NEGBIN (phi the dispersion r; a1 the log exposure, a2 -log y_i!):  l_i = a2_i
 *       + lgamma(y_i + r) - lgamma(r) + r log(1 - p_i) + y_i log p_i, p_i = mu_i / (r + mu_i),
 *       mu_i = e^{eta_i}
 *   LAP_GAUSSIAN (phi the noise sd sigma):  l_i = -log(2 pi sigma^2)/2 - (y_i - f_i)^2 / 2 sigma^2
 * The mode of Psi(f) = sum_i l_i - (f - m)' K^-1 (f - m) / 2 by Newton's method in the
 * whitened coordinates f = m + L_K v, in the stable form of R&W Algorithm 3.1: B = I + W^1/2 K
 * W^1/2 = L_B L_B', the step A^-1 g = g - L_K' W^1/2 B^-1 W^1/2 L_K g for the gradient
 * g = L_K' l' - v (Woodbury), the same Armijo line search, convergence test and pending
 * Newton step as bayes_gp.latent.laplace (whose module docstring derives them) and
 * bayes_gp.latent.native, whose nopython solver this transcribes step for step. Then
 *   log q = sum_i l_i(f^) - v'v / 2 - sum_i log (L_B)_ii                      (R&W eq. 3.32)
 * and its gradient (R&W Algorithm 5.1 / eqs. 5.22-5.24 generalised), with a = L_K^-T v,
 * R = W^1/2 B^-1 W^1/2, diag(Sigma)_i = sum_j K_ij R_ij / W_i (K_ii - k_i' R k_i where W_i is
 * nearly 0), s2 = diag(Sigma) l''' / 2 and u = s2 - W (K s2 - K R K s2):
 *   d log q / dK = (a a' - R + u l'' + l' u') / 2,   d log q / dm = a + u,
 * contracted with dK/dtheta by exact_gp.c's kernel_grad_row (R&W eq. 5.9's pattern), and
 *   d log q / d phi = sum_i dl_i + sum_i diag(Sigma)_i dl''_i / 2 + (Sigma s2)' dl'
 * with dl, dl', dl'' the derivatives of l, l', l'' in phi (R&W eq. 5.24's implicit term). */

enum { LAP_BERNOULLI = 0, LAP_BINOMIAL = 1, LAP_POISSON = 2, LAP_NEGBIN = 3, LAP_GAUSSIAN = 4 };
/* the solver's status (bayes_gp.latent.native's): done, K not positive definite, Newton's
 * method did not converge, the stable form could not proceed */
enum { LAP_OK = 0, LAP_K_NOT_PD = 1, LAP_NOT_CONVERGED = 2, LAP_B_NOT_PD = 3 };

#define LAP_W_DIRECT 1e-150
#define LAP_EPS 2.220446049250313e-16

typedef struct {
    int64_t n, off_mean, code, max_iter, warm; /* off_mean -1: the mean fixed; warm: start */
    int64_t off_phi;                    /* the coordinate of log phi, -1: fixed (phi_fixed) */
    double mean_fixed, tol, phi_fixed;  /* phi_fixed: log phi */
    const coords_t *coords;             /* nutpie's stored values: coords->n_head */
    const double *y, *a1, *a2, *start;  /* n each; start: Newton's first f where warm */
    const gp_t *g;                      /* the kernel of f, with the jitter (its y unused) */
} lap_t;

/* One evaluation's workspace: the kernel's eval_t (its A becomes L_K), K (n x n, full), B's
 * factor and then R (n x n), and the vectors of the Newton iteration and the gradient. */
typedef struct {
    eval_t e;
    double *K, *B, *v, *f, *d1, *d2, *d3, *vt, *ft, *d1t, *d2t, *d3t, *W, *sW, *Ld1, *gr, *t1,
        *dv, *a, *dS, *col, *rcol, *s2, *ks2, *u, *w;
} lap_eval_t;

#define LAP_VECTORS 24

static int lap_space(const lap_t *l, lap_eval_t *e) {
    size_t n = (size_t)l->n;
    double *w = workspace(eval_size(l->g) + 2 * n * n + LAP_VECTORS * n);
    if (!w) return 0;
    w = eval_carve(l->g, w, &e->e);
    e->K = w;
    e->B = w + n * n;
    double **vec[LAP_VECTORS] = {&e->v,  &e->f,  &e->d1, &e->d2, &e->d3,  &e->vt,
                                 &e->ft, &e->d1t, &e->d2t, &e->d3t, &e->W, &e->sW,
                                 &e->Ld1, &e->gr, &e->t1, &e->dv, &e->a,  &e->dS,
                                 &e->col, &e->rcol, &e->s2, &e->ks2, &e->u, &e->w};
    double *p = w + 2 * n * n;
    for (int k = 0; k < LAP_VECTORS; k++, p += n) *vec[k] = p;
    return 1;
}

static inline double lap_expit(double x) {
    if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
    double t = exp(x);
    return t / (1.0 + t);
}

static inline double lap_log1pexp(double x) { /* log(1 + e^x) as np.logaddexp(0, x) */
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

/* psi(x), x > 0: the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic
 * series (Abramowitz & Stegun 6.3.18) to x^-10: truncation below 1e-14 there. */
static double digamma(double x) {
    double r = 0.0;
    for (; x < 10.0; x += 1.0) r -= 1.0 / x;
    const double f = 1.0 / (x * x);
    return r + log(x) - 0.5 / x -
           f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))));
}

static inline double log_gamma(double x) { /* lgamma without its global sign (threads) */
    int sign;
    return lgamma_r(x, &sign);
}

/* sum_i l_i at f and the likelihood parameter phi, with l', l'', l''' into d1, d2, d3. */
static double lap_derivatives(const lap_t *l, double phi, const double *f, double *d1,
                              double *d2, double *d3) {
    const double *y = l->y, *a1 = l->a1, *a2 = l->a2;
    double total = 0.0;
    if (l->code == LAP_NEGBIN) {
        const double lr = log(phi), lgr = log_gamma(phi);
        for (int64_t i = 0; i < l->n; i++) {
            const double eta = f[i] + a1[i], p = lap_expit(eta - lr);
            const double log1mp = -lap_log1pexp(eta - lr); /* log(r / (r + mu)) */
            total += log_gamma(y[i] + phi) - lgr + a2[i] + phi * log1mp +
                     y[i] * (eta - lr + log1mp);
            d1[i] = y[i] - (y[i] + phi) * p;
            d2[i] = -(y[i] + phi) * p * (1.0 - p);
            d3[i] = d2[i] * (1.0 - 2.0 * p);
        }
        return total;
    }
    if (l->code == LAP_GAUSSIAN) {
        const double iv = 1.0 / (phi * phi), c = -0.5 * log(2.0 * M_PI) - log(phi);
        for (int64_t i = 0; i < l->n; i++) {
            const double r = y[i] - f[i];
            total += c - 0.5 * r * r * iv;
            d1[i] = r * iv;
            d2[i] = -iv;
            d3[i] = 0.0;
        }
        return total;
    }
    for (int64_t i = 0; i < l->n; i++) {
        if (l->code == LAP_POISSON) {
            const double eta = f[i] + a1[i], mu = exp(eta);
            total += a2[i] + y[i] * eta - mu;
            d1[i] = y[i] - mu;
            d2[i] = -mu;
            d3[i] = -mu;
            continue;
        }
        const double pi = lap_expit(f[i]);
        if (l->code == LAP_BERNOULLI)
            total += -lap_log1pexp(-(2.0 * y[i] - 1.0) * f[i]);
        else
            total += a2[i] + y[i] * f[i] - a1[i] * lap_log1pexp(f[i]);
        const double w = a1[i] * pi * (1.0 - pi);
        d1[i] = y[i] - a1[i] * pi;
        d2[i] = -w;
        d3[i] = -w * (1.0 - 2.0 * pi);
    }
    return total;
}

/* Triangular products and solves with a lower triangular L, column-major (column j
 * contiguous from L + j n, its diagonal on). */
static void lower_mv(int64_t n, const double *L, const double *v, double *out) { /* L v */
    for (int64_t i = 0; i < n; i++) out[i] = 0.0;
    for (int64_t j = 0; j < n; j++) {
        const double *restrict col = L + j * n, vj = v[j];
        for (int64_t i = j; i < n; i++) out[i] += col[i] * vj;
    }
}

static void lower_t_mv(int64_t n, const double *L, const double *v, double *out) { /* L'v */
    for (int64_t j = 0; j < n; j++) {
        const double *restrict col = L + j * n;
        double s = 0.0;
        for (int64_t i = j; i < n; i++) s += col[i] * v[i];
        out[j] = s;
    }
}

static void lower_solve(int64_t n, const double *L, double *b) { /* L z = b, over b */
    for (int64_t j = 0; j < n; j++) {
        const double *restrict col = L + j * n;
        const double z = b[j] / col[j];
        b[j] = z;
        for (int64_t i = j + 1; i < n; i++) b[i] -= col[i] * z;
    }
}

static void lower_t_solve(int64_t n, const double *L, double *b) { /* L' z = b, over b */
    for (int64_t j = n - 1; j >= 0; j--) {
        const double *restrict col = L + j * n;
        double s = 0.0;
        for (int64_t i = j + 1; i < n; i++) s += col[i] * b[i];
        b[j] = (b[j] - s) / col[j];
    }
}

static void sym_mv(int64_t n, const double *S, const double *v, double *out) { /* S v, full S */
    for (int64_t i = 0; i < n; i++) {
        const double *restrict row = S + i * n;
        double s = 0.0;
        for (int64_t j = 0; j < n; j++) s += row[j] * v[j];
        out[i] = s;
    }
}

static double max_abs(int64_t n, const double *v) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fabs(v[i]) > m ? fabs(v[i]) : m;
    return m;
}

static double dot(int64_t n, const double *a, const double *b) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* W^1/2 into sW and L_B over e->B (column-major lower); 0 where W has a negative or non-finite
 * entry or B is not positive definite. */
static int lap_factor_B(const lap_t *l, lap_eval_t *e) {
    const int64_t n = l->n;
    for (int64_t i = 0; i < n; i++) {
        if (!(e->W[i] >= 0.0 && isfinite(e->W[i]))) return 0;
        e->sW[i] = sqrt(e->W[i]);
    }
    for (int64_t j = 0; j < n; j++) {
        double *restrict col = e->B + j * n;
        const double *restrict krow = e->K + j * n, *restrict sW = e->sW;
        for (int64_t i = j; i < n; i++) col[i] = sW[i] * krow[i] * sW[j];
        col[j] += 1.0;
    }
    int ni = (int)n, info = 0;
    char lo = 'L';
    l->g->potrf(&lo, &ni, e->B, &ni, &info);
    return info == 0;
}

/* The derivatives of l_i, l'_i and l''_i in phi (dl, dd1, dd2) at f. */
static void lap_phi_derivatives(const lap_t *l, double phi, const double *f, double *dl,
                                double *dd1, double *dd2) {
    const double *y = l->y, *a1 = l->a1;
    if (l->code == LAP_NEGBIN) { /* 1 / (r + mu) = (1 - p) / r: no overflow where mu does */
        const double lr = log(phi), psi_r = digamma(phi);
        for (int64_t i = 0; i < l->n; i++) {
            const double eta = f[i] + a1[i], p = lap_expit(eta - lr), q = (1.0 - p) / phi;
            dl[i] = digamma(y[i] + phi) - psi_r - lap_log1pexp(eta - lr) + p - y[i] * q;
            dd1[i] = p * (y[i] * q - p);
            dd2[i] = -p * (1.0 - p) + (y[i] + phi) * (1.0 - 2.0 * p) * p * q;
        }
        return;
    }
    const double i3 = 1.0 / (phi * phi * phi); /* LAP_GAUSSIAN */
    for (int64_t i = 0; i < l->n; i++) {
        const double r = y[i] - f[i];
        dl[i] = -1.0 / phi + r * r * i3;
        dd1[i] = -2.0 * r * i3;
        dd2[i] = 2.0 * i3;
    }
}

/* f = m + L_K v and Psi(v) = sum_i l_i - v'v / 2 with the likelihood's derivatives. */
static double lap_psi(const lap_t *l, double phi, const double *LK, double mu, const double *v,
                      double *f, double *d1, double *d2, double *d3) {
    const int64_t n = l->n;
    lower_mv(n, LK, v, f);
    for (int64_t i = 0; i < n; i++) f[i] += mu;
    return lap_derivatives(l, phi, f, d1, d2, d3) - 0.5 * dot(n, v, v);
}

static void lap_accept(int64_t n, lap_eval_t *e) { /* the trial point becomes the iterate */
    memcpy(e->v, e->vt, sizeof(double) * n);
    memcpy(e->f, e->ft, sizeof(double) * n);
    memcpy(e->d1, e->d1t, sizeof(double) * n);
    memcpy(e->d2, e->d2t, sizeof(double) * n);
    memcpy(e->d3, e->d3t, sizeof(double) * n);
}

/* The Laplace approximation at the coordinates x, Newton's method started from f0 (NULL: from
 * f = m): the status (LAP_*), log q into *logq, the mode into e->f and diag(Sigma) into e->dS;
 * where grad is not NULL, the gradient of log q in x added to it. */
static int lap_solve(const lap_t *l, const double *x, lap_eval_t *e, const double *f0,
                     double *logq, double *grad) {
    const int64_t n = l->n;
    const double mu = l->off_mean >= 0 ? x[l->off_mean] : l->mean_fixed, tol = l->tol;
    const int has_phi = l->code == LAP_NEGBIN || l->code == LAP_GAUSSIAN;
    const double phi_scale = l->off_phi >= 0 ? l->coords->scale[l->off_phi] : 0.0;
    const double phi =
        !has_phi ? 0.0 : exp(l->off_phi >= 0 ? phi_scale * x[l->off_phi] : l->phi_fixed);
    assemble(l->g, x, &e->e);
    double *LK = e->e.A, *K = e->K;
    for (int64_t i = 0; i < n; i++) /* K in full from the row-major upper triangle */
        for (int64_t j = i; j < n; j++) K[i * n + j] = K[j * n + i] = LK[i * n + j];
    {
        int ni = (int)n, info = 0;
        char lo = 'L';
        l->g->potrf(&lo, &ni, LK, &ni, &info);
        if (info != 0) return LAP_K_NOT_PD;
    }
    double *v = e->v, *f = e->f, *d1 = e->d1, *d2 = e->d2, *d3 = e->d3, *W = e->W, *sW = e->sW;
    double *g = e->gr, *t1 = e->t1, *dv = e->dv;
    for (int64_t i = 0; i < n; i++) v[i] = 0.0;
    int finite = f0 != NULL;
    for (int64_t i = 0; finite && i < n; i++) finite = isfinite(f0[i]);
    if (finite) { /* v0 = L_K^-1 (f0 - m) */
        for (int64_t i = 0; i < n; i++) v[i] = f0[i] - mu;
        lower_solve(n, LK, v);
    }
    double psi = lap_psi(l, phi, LK, mu, v, f, d1, d2, d3);
    if (!isfinite(psi)) { /* a start where the likelihood overflows: start at f = m */
        for (int64_t i = 0; i < n; i++) v[i] = 0.0;
        psi = lap_psi(l, phi, LK, mu, v, f, d1, d2, d3);
    }
    int converged = 0, factored = 0;
    for (int64_t it = 0; it < l->max_iter; it++) {
        for (int64_t i = 0; i < n; i++) W[i] = -d2[i];
        if (!lap_factor_B(l, e)) return LAP_B_NOT_PD;
        factored = 1;
        lower_t_mv(n, LK, d1, e->Ld1);
        for (int64_t i = 0; i < n; i++) g[i] = e->Ld1[i] - v[i];
        /* the Newton step A^-1 g = g - L_K' W^1/2 B^-1 W^1/2 L_K g (Woodbury) */
        lower_mv(n, LK, g, t1);
        for (int64_t i = 0; i < n; i++) t1[i] *= sW[i];
        lower_solve(n, e->B, t1);
        lower_t_solve(n, e->B, t1);
        for (int64_t i = 0; i < n; i++) t1[i] *= sW[i];
        lower_t_mv(n, LK, t1, dv);
        for (int64_t i = 0; i < n; i++) dv[i] = g[i] - dv[i];
        const double dec = dot(n, g, dv), scale = 1.0 + max_abs(n, v), gmax = max_abs(n, g);
        if (dec < tol * tol && gmax < tol * scale) {
            converged = 1;
            if (max_abs(n, dv) > 32.0 * LAP_EPS * scale) { /* the pending Newton step */
                for (int64_t i = 0; i < n; i++) e->vt[i] = v[i] + dv[i];
                double psi_t = lap_psi(l, phi, LK, mu, e->vt, e->ft, e->d1t, e->d2t, e->d3t);
                if (isfinite(psi_t)) {
                    lap_accept(n, e);
                    psi = psi_t;
                    factored = 0;
                }
            }
            break;
        }
        if (dec < 1e-9 * (1.0 + fabs(psi))) { /* full step in the quadratic region */
            for (int64_t i = 0; i < n; i++) v[i] += dv[i];
            psi = lap_psi(l, phi, LK, mu, v, f, d1, d2, d3);
            continue;
        }
        double t = 1.0, psi_t = -INFINITY; /* backtracking line search (Armijo) */
        int accepted = 0;
        for (int ls = 0; ls < 60; ls++) {
            for (int64_t i = 0; i < n; i++) e->vt[i] = v[i] + t * dv[i];
            psi_t = lap_psi(l, phi, LK, mu, e->vt, e->ft, e->d1t, e->d2t, e->d3t);
            if (isfinite(psi_t) && psi_t >= psi + 1e-4 * t * dec) {
                accepted = 1;
                break;
            }
            t *= 0.5;
        }
        if (!accepted) { /* no increase representable: at the mode to machine precision */
            const double bound = tol > 1e-6 ? tol : 1e-6;
            converged = gmax < bound * (1.0 + max_abs(n, e->Ld1));
            break;
        }
        lap_accept(n, e);
        psi = psi_t;
    }
    if (!converged) return LAP_NOT_CONVERGED;
    if (!factored) {
        for (int64_t i = 0; i < n; i++) W[i] = -d2[i];
        if (!lap_factor_B(l, e)) return LAP_B_NOT_PD;
    }
    double lq = psi;
    for (int64_t i = 0; i < n; i++) lq -= log(e->B[i * n + i]);
    *logq = lq;

    /* R = W^1/2 B^-1 W^1/2 in full over e->B (the lower triangle read, the upper written) */
    if (inverse_from_factor(l->g, (int)n, e->B) != 0) return LAP_B_NOT_PD;
    double *R = e->B;
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = j; i < n; i++) {
            const double r = sW[i] * R[j * n + i] * sW[j];
            R[j * n + i] = r;
            R[i * n + j] = r;
        }
    /* diag(Sigma): sum_j K_ij R_ij / W_i, or K_ii - k_i' R k_i where W_i is (nearly) 0 */
    double *dS = e->dS;
    for (int64_t i = 0; i < n; i++) {
        const double *restrict krow = K + i * n, *restrict rrow = R + i * n;
        if (W[i] >= LAP_W_DIRECT) {
            dS[i] = dot(n, krow, rrow) / W[i];
        } else {
            sym_mv(n, R, krow, e->rcol);
            dS[i] = K[i * n + i] - dot(n, krow, e->rcol);
        }
    }
    if (!grad) return LAP_OK;

    /* a = K^-1 (f - m) = L_K^-T v; u = s2 - W Sigma s2, Sigma s2 = K s2 - K R K s2 */
    double *a = e->a, *s2 = e->s2, *ks2 = e->ks2, *u = e->u, *w = e->w;
    memcpy(a, v, sizeof(double) * n);
    lower_t_solve(n, LK, a);
    for (int64_t i = 0; i < n; i++) s2[i] = 0.5 * dS[i] * d3[i];
    sym_mv(n, K, s2, ks2);
    sym_mv(n, R, ks2, e->col);
    sym_mv(n, K, e->col, e->rcol);
    for (int64_t i = 0; i < n; i++) u[i] = s2[i] - W[i] * (ks2[i] - e->rcol[i]);
    /* the kernel's parameters: sum_ij G_ij dK_ij/dtheta, G = d log q / dK, over the upper
     * triangle (w_j = 2 G_ij off the diagonal); the mean: sum_i (a + u)_i */
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = n - i - 1;
        const double ai = a[i], ui = u[i], di = d1[i], *rrow = R + i * n + i + 1;
        const double *aj = a + i + 1, *uj = u + i + 1, *dj = d1 + i + 1;
        for (int64_t j = 0; j < m; j++) w[j] = ai * aj[j] - rrow[j] + ui * dj[j] + di * uj[j];
        grad_row(l->g, &e->e, i, w, 0.5 * (ai * ai - R[i * n + i]) + ui * di);
    }
    table_grad(l->g, &e->e);
    slots_to_grad(l->g, &e->e, grad);
    if (l->off_mean >= 0) {
        double s = 0.0;
        for (int64_t i = 0; i < n; i++) s += a[i] + u[i];
        grad[l->off_mean] += s;
    }
    if (has_phi && l->off_phi >= 0) { /* Sigma s2 = K s2 - K R K s2; dphi/du = s phi */
        double *dl = e->vt, *dd1 = e->ft, *dd2 = e->d1t;
        lap_phi_derivatives(l, phi, f, dl, dd1, dd2);
        double gphi = 0.0;
        for (int64_t i = 0; i < n; i++)
            gphi += dl[i] + 0.5 * dS[i] * dd2[i] + (ks2[i] - e->rcol[i]) * dd1[i];
        grad[l->off_phi] += phi_scale * phi * gphi;
    }
    return LAP_OK;
}

int64_t lap_logp(uint64_t dim, const double *x, double *grad, double *logp, void *data) {
    const lap_t *l = (const lap_t *)data;
    if ((int64_t)dim != l->coords->n_free) return -1;
    lap_eval_t e;
    if (!lap_space(l, &e)) return 1;
    double lp = priors(l->coords, x, grad), lq = 0.0;
    *logp = -INFINITY;
    if (lap_solve(l, x, &e, l->warm ? l->start : NULL, &lq, grad) != LAP_OK) return 4;
    return finish(l->coords->n_free, grad, lp + lq, logp);
}

/* The type-II objective of the Laplace approximation (bayes_gp.inference.typeii.optimize; as
 * exact_gp.c's gp_objective): log q, plus where with_prior the priors without the
 * log-Jacobians, into *value, and its gradient in x. Newton's method starts from the
 * description's start (warm) or f = m. Returns 0, 1 when memory could not be allocated, 3 or
 * 4 as lap_logp. */
int64_t lap_objective(const lap_t *l, const double *x, int64_t with_prior, double *grad,
                      double *value) {
    lap_eval_t e;
    if (!lap_space(l, &e)) return 1;
    double lp = objective_priors(l->coords, x, with_prior, grad), lq = 0.0;
    *value = -INFINITY;
    if (lap_solve(l, x, &e, l->warm ? l->start : NULL, &lq, grad) != LAP_OK) return 4;
    return finish(l->coords->n_free, grad, lp + lq, value);
}

int64_t lap_expand(uint64_t dim, uint64_t expanded, const double *x, double *out, void *data) {
    const lap_t *l = (const lap_t *)data;
    if ((int64_t)dim != l->coords->n_free || (int64_t)expanded != l->coords->n_head) return -1;
    expand_head(l->coords, x, out);
    return 0;
}

/* The Laplace approximation at each of `draws` points x (draws x n_free), in order, each
 * Newton's method started from the previous point's mode (the first from f0, or from f = m
 * where f0 is NULL): the mode into f_out, diag(Sigma) into ds_out (draws x n each), log q
 * into logq and the status into status (draws each). Returns -1 when memory could not be
 * allocated, else the number of points whose status is not LAP_OK. */
int64_t lap_modes(const lap_t *l, int64_t draws, const double *x, const double *f0,
                  double *f_out, double *ds_out, double *logq, int64_t *status) {
    const int64_t n = l->n;
    lap_eval_t e;
    if (!lap_space(l, &e)) return -1;
    int64_t failed = 0;
    const double *start = f0;
    for (int64_t k = 0; k < draws; k++) {
        double lq = -INFINITY;
        status[k] = lap_solve(l, x + k * l->coords->n_free, &e, start, &lq, NULL);
        logq[k] = status[k] == LAP_OK ? lq : -INFINITY;
        if (status[k] != LAP_OK) {
            for (int64_t i = 0; i < n; i++) f_out[k * n + i] = ds_out[k * n + i] = NAN;
            failed++;
            continue;
        }
        memcpy(f_out + k * n, e.f, sizeof(double) * n);
        memcpy(ds_out + k * n, e.dS, sizeof(double) * n);
        start = f_out + k * n;
    }
    return failed;
}
