"""The flat parameter vector of a deep kernel: network weights and kernel hyperparameters in one
unconstrained vector, as the optimiser and the gradient see them (:class:`ParameterLayout`).

The vector is the network's blocks in the order of
:attr:`~bayes_gp.deep.network.FeatureExtractor.params`, then the kernel hyperparameters and
``sigma``. Network blocks are stored as they are (weights live on the whole real line); kernel
hyperparameters and ``sigma`` are positive and stored as their logarithms.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

import numpy as np
import pytensor.tensor as pt

from bayes_gp.deep.network import FeatureExtractor

__all__ = ["ParameterLayout", "is_network_name"]


#: Initial values of kernel hyperparameters by name (``eta``/``theta0``/``theta2`` on the scale of y,
#: ``ls`` on the scale of the initial features; see :meth:`ParameterLayout.initial_hyper`).
_INIT = {"alpha": 1.0, "period": 1.0, "theta1": 1.0}


def is_network_name(name: str) -> bool:
    """Network parameters are ``W<l>``, ``b<l>``, ``lam<l>``, ``W_out``, ``b_out``."""
    return re.fullmatch(r"(W|b)(\d+|_out)|lam\d+", name) is not None


class ParameterLayout:
    """Where each named parameter of a deep kernel sits in the flat unconstrained vector.

    Parameters
    ----------
    net : FeatureExtractor
        The network whose blocks come first.
    kernel_params : sequence of str
        The kernel's free hyperparameters (``sigma`` is appended).
    ard_params : collection of str
        The hyperparameters with one value per feature (empty without ARD).

    Attributes
    ----------
    hyper_names : list of str
        The kernel hyperparameters and ``sigma``.
    hyper_shapes : dict
        Their shapes: ``(Q,)`` for ARD hyperparameters, ``()`` otherwise.
    blocks : list of (str, tuple)
        Every block's name and shape, in the order of the vector.
    size : int
        The length of the vector.
    """

    def __init__(
        self, net: FeatureExtractor, kernel_params: Sequence[str], ard_params: Collection[str]
    ):
        Q = net.output_dim
        self.net = net
        self.hyper_names = [*kernel_params, "sigma"]
        self.hyper_shapes = {p: ((Q,) if p in ard_params else ()) for p in self.hyper_names}
        self.blocks = [(p.name, p.shape) for p in net.params] + [
            (p, self.hyper_shapes[p]) for p in self.hyper_names
        ]
        self.size = int(sum(np.prod(s, dtype=int) for _, s in self.blocks))

    def unpack(self, theta) -> dict:
        """Named parameters of the flat vector ``theta`` (hyperparameters exponentiated); works
        on NumPy vectors and on PyTensor vectors."""
        symbolic = isinstance(theta, pt.TensorVariable)
        if not symbolic:
            theta = np.asarray(theta, dtype=float)
            if theta.shape != (self.size,):
                raise ValueError(f"`theta` must have shape ({self.size},), got {theta.shape}")
        out, i = {}, 0
        exp = pt.exp if symbolic else np.exp
        for name, shape in self.blocks:
            size = int(np.prod(shape, dtype=int))
            block = theta[i : i + size].reshape(shape) if shape else theta[i]
            out[name] = block if is_network_name(name) else exp(block)
            i += size
        return out

    def pack(self, params: Mapping) -> np.ndarray:
        """The flat vector of named parameters (inverse of :meth:`unpack`); a scalar stands for
        every feature of an ARD hyperparameter.

        Raises
        ------
        ValueError
            If a name is missing or unknown, a shape is wrong, a value is not finite, or a
            hyperparameter is not positive.
        """
        missing = [n for n, _ in self.blocks if n not in params]
        if missing:
            raise ValueError(f"`params` is missing {missing}")
        unknown = set(params) - {n for n, _ in self.blocks}
        if unknown:
            raise ValueError(f"`params` has unknown names {sorted(unknown)}")
        parts = []
        for name, shape in self.blocks:
            v = np.asarray(params[name], dtype=float)
            if not is_network_name(name) and shape and v.ndim == 0:
                v = np.full(shape, float(v))
            if v.shape != shape:
                raise ValueError(f"`params[{name!r}]` has shape {v.shape}, expected {shape}")
            if not np.all(np.isfinite(v)):
                raise ValueError(f"`params[{name!r}]` is not finite")
            if not is_network_name(name):
                if np.any(v <= 0):
                    raise ValueError(f"`params[{name!r}]` must be positive, got {v!r}")
                v = np.log(v)
            parts.append(np.ravel(v))
        return np.concatenate(parts) if parts else np.zeros(0)

    def split(self, theta: np.ndarray) -> tuple[dict, dict]:
        """``(kernel hyperparameters and sigma, network parameters)`` of a flat vector, as
        copies."""
        named = {k: np.asarray(v).copy() for k, v in self.unpack(theta).items()}
        kernel = {k: v for k, v in named.items() if not is_network_name(k)}
        return kernel, {k: v for k, v in named.items() if is_network_name(k)}

    def net_vector(self, net_params: Mapping) -> np.ndarray:
        """A flat vector with the network block set and the kernel block zero (enough to compute
        the features)."""
        parts = [np.ravel(np.asarray(net_params[p.name], float)) for p in self.net.params]
        k = self.size - self.net.size
        return np.concatenate([*parts, np.zeros(k)]) if parts or k else np.zeros(0)

    def initial_hyper(self, Z: np.ndarray, y_sd: float) -> dict:
        """Starting values of the kernel hyperparameters and ``sigma`` for features ``Z`` of the
        initial network: length-scales at the features' standard deviations, amplitudes at the
        scale ``y_sd`` of the targets, ``sigma`` at ``0.3 * y_sd``, others from ``_INIT``."""
        zsd = np.std(Z, axis=0)
        zsd = np.where(zsd > 1e-6, zsd, 1.0)
        init = {}
        for p in self.hyper_names:
            base = p.rsplit("_", 1)[-1]
            shape = self.hyper_shapes[p]
            if base == "ls":
                v = zsd if shape else float(np.mean(zsd))
            elif base == "eta":
                v = y_sd
            elif base in ("theta0", "theta2", "theta3"):
                v = y_sd**2 if base == "theta0" else 0.1 * y_sd**2
            elif base == "sigma":
                v = 0.3 * y_sd
            else:
                v = _INIT.get(base, 1.0)
            init[p] = np.full(shape, v) if shape and np.ndim(v) == 0 else v
        return init
