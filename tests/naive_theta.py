"""Slow, obvious references for Stage 2 (the theta update), written from the formulas.

rho, sigma come from ``naive.py``. Conventions (as documented in ``ntnumba/model/theta.py``): a
sample with rho(y_i, nu_j2(i)) = 0 has no ratio term; the prior term of a parameter is the min
over the pairs (tau', nu*) of OTHER parameters with rho(y, nu*) > 0, and 0 if there is none.
Nothing here imports the code under test.
"""
import numpy as np
from scipy.optimize import minimize, minimize_scalar

from naive import rho, sigma


def prior_term(y, taus, nus):
    """f_c(y, theta') = min over pairs of rho(y,tau')/rho(y,nu*) + sigma(y,tau'); 0 if none."""
    best = np.inf
    for t in taus:
        for v in nus:
            den = rho(y, v)
            if den > 0:
                best = min(best, rho(y, t) / den + sigma(y, t))
    return 0.0 if best == np.inf else best


def prior_up(tau, nu):
    total = 0.0
    for c in range(len(tau)):
        total += prior_term(tau[c], [tau[k] for k in range(len(tau)) if k != c], list(nu))
    for c in range(len(nu)):
        total += prior_term(nu[c], list(tau), [nu[k] for k in range(len(nu)) if k != c])
    return total


def sample_ratio(y, t, v):
    den = rho(y, v)
    return rho(y, t) / den if den > 0 else 0.0


def theta_objective(Q, Y, labels, sim, tau, nu, lambda0, lambda_a, lambda_e):
    total = 0.0
    for i in range(len(Q)):
        t, v = tau[labels[i]], nu[sim[i]]
        total += 0.5 * lambda_a * float(np.sum((Q[i] - t - v) ** 2))
        total += lambda0 * (sample_ratio(Y[i], t, v) + sigma(Y[i], t))
    return total + lambda_e * prior_up(tau, nu)


def tau_subproblem(t, c1, Q, Y, labels, sim, tau, nu, lambda0, lambda_a, lambda_e):
    """T_c1(t): members of c1 with the given nus; prior over the other taus and all nus."""
    total = 0.0
    for i in np.flatnonzero(labels == c1):
        v = nu[sim[i]]
        total += 0.5 * lambda_a * float(np.sum((Q[i] - t - v) ** 2))
        total += lambda0 * (sample_ratio(Y[i], t, v) + sigma(Y[i], t))
    others = [tau[k] for k in range(len(tau)) if k != c1]
    return total + lambda_e * prior_term(t, others, list(nu))


def nu_subproblem(z, c2, Q, Y, labels, sim, tau, nu, lambda0, lambda_a, lambda_e):
    """N_c2(z): members of c2 with the given (new) taus; prior over all taus, the other nus."""
    total = 0.0
    for i in np.flatnonzero(sim == c2):
        t = tau[labels[i]]
        total += 0.5 * lambda_a * float(np.sum((Q[i] - t - z) ** 2))
        den = rho(Y[i], z)
        if den > 0:
            total += lambda0 * rho(Y[i], t) / den
    others = [nu[k] for k in range(len(nu)) if k != c2]
    return total + lambda_e * prior_term(z, list(tau), others)


def tau_coordinatewise_bruteforce(c1, Q, Y, labels, sim, tau, nu, lambda0, lambda_a):
    """lambda_e = 0: minimise each coordinate of T_c1 by a bounded 1-D search on each branch.

    Coordinate j of the data terms, written per sample:
    phi_j(t) = sum_i lambda_a/2 (q_ij - nu_ij - t)^2 + lambda0 (max(y_ij t, 0)/rho(y_i, nu_i)
               + (y_ij t)^2).
    """
    idx = np.flatnonzero(labels == c1)
    M = Q.shape[1]
    out = np.zeros(M)
    dens = [rho(Y[i], nu[sim[i]]) for i in idx]
    for j in range(M):
        def phi(t):
            val = 0.0
            for i, den in zip(idx, dens):
                val += 0.5 * lambda_a * (Q[i, j] - nu[sim[i], j] - t) ** 2
                if den > 0:
                    val += lambda0 * max(Y[i, j] * t, 0.0) / den
                val += lambda0 * (Y[i, j] * t) ** 2
            return val
        scale = 10.0 + np.max(np.abs(Q[idx, j]) + np.abs(nu[sim[idx], j]), initial=0.0)
        best_t, best_v = 0.0, phi(0.0)
        for lo, hi in ((0.0, scale), (-scale, 0.0)):
            r = minimize_scalar(phi, bounds=(lo, hi), method="bounded",
                                options={"xatol": 1e-13, "maxiter": 2000})
            if r.fun < best_v:
                best_t, best_v = float(r.x), float(r.fun)
        out[j] = best_t
    return out


def tau_lbfgs(c1, s, Q, Y, labels, sim, tau, nu, lambda0, lambda_a, lambda_e, starts):
    """Multistart L-BFGS-B of T_c1 over tau = s * a, a >= 0 (an upper bound of the minimum)."""
    def f(a):
        return tau_subproblem(s * a, c1, Q, Y, labels, sim, tau, nu, lambda0, lambda_a,
                              lambda_e)
    best = np.inf
    for a0 in starts:
        r = minimize(f, a0, method="L-BFGS-B", bounds=[(0, None)] * len(a0))
        best = min(best, float(r.fun))
    return best
