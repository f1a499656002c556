r"""Feature extractors for deep kernels: multilayer perceptrons in PyTensor (Wilson et al. 2016), and
the "GP neural network" whose hidden units mix several activation functions.

A network :math:`g(x; W)` maps an input :math:`x \in \mathbb R^D` to features
:math:`z \in \mathbb R^Q` through dense layers (:math:`o = xW + b`)

.. math:: h^{(l)} = a\big(h^{(l-1)}W^{(l)} + b^{(l)}\big), \qquad z = h^{(L)}W^{out} + b^{out},

with an activation :math:`a` (``"relu"``, ``"gelu"``, ``"sigmoid"``, ``"tanh"``) or, with
``activation="mixture"``, a learned weighted mixture per hidden unit :math:`i` of layer :math:`l`:

.. math:: h_i^{(l)} = \sum_m \lambda_i^{(l,m)}\,\phi_m\big(w_i^{(l)\top}h^{(l-1)} + b_i^{(l)}\big),
   \qquad \phi_m \in \{\mathrm{ReLU}, \mathrm{GELU}, \mathrm{sigmoid}, \tanh\},

a linear combination of activation-function "basis functions". The coefficients
:math:`\lambda` are parameters like the weights; :class:`~bayes_gp.deep.DeepKernelRegression`
fits both by MAP and can sample :math:`\lambda` by NUTS with the weights fixed (a one-sample
approximation of :math:`p(w \mid \mathcal D)`; Bayesian neural networks: PRML §5.7).

Weights are initialised with :math:`W \sim N(0, 1/D_{in})` (LeCun et al. 1998); the biases of the
hidden layers are drawn from :math:`N(0, 1)` (not zero) so that, for low-dimensional
inputs, the units' kinks and saturations are spread over the data instead of all sitting at the
origin; output biases start at zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

__all__ = ["ACTIVATIONS", "MIXTURE_ACTIVATIONS", "FeatureExtractor", "get_activation"]

_SQRT1_2 = 0.7071067811865476


def _relu(a):
    return pt.maximum(a, 0.0)


def _gelu(a):
    # exact GELU, x * Phi(x) (Hendrycks & Gimpel 2016)
    return 0.5 * a * (1.0 + pt.erf(a * _SQRT1_2))


def _sigmoid(a):
    return pt.sigmoid(a)


def _tanh(a):
    return pt.tanh(a)


#: Activation functions by name (PyTensor).
ACTIVATIONS = {"relu": _relu, "gelu": _gelu, "sigmoid": _sigmoid, "tanh": _tanh}
#: The activations mixed by ``activation="mixture"`` (ReLU, GELU, sigmoid, tanh).
MIXTURE_ACTIVATIONS = ("relu", "gelu", "sigmoid", "tanh")


def get_activation(name: str):
    """The activation function ``name`` (see :data:`ACTIVATIONS`)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; known: {sorted(ACTIVATIONS)} or 'mixture'")
    return ACTIVATIONS[name]


@dataclass(frozen=True)
class Param:
    """One parameter block of the network."""

    name: str
    shape: tuple[int, ...]
    kind: str  # "weight", "bias", "mixture"
    layer: int  # 0.. for hidden layers, -1 for the output layer


class FeatureExtractor:
    r"""A multilayer perceptron :math:`g(x; W)`, or the identity.

    Parameters
    ----------
    input_dim : int
        D, the number of input columns.
    hidden : sequence of int
        Widths of the hidden layers (each followed by the activation). ``()``: none.
    features : int, optional
        Q, the width of a final linear layer (Wilson et al. 2016 use Q = 2). ``None``: no output
        layer; the features are the last hidden layer (or the inputs themselves when ``hidden``
        is empty too: the identity network).
    activation : str
        ``"tanh"``, ``"relu"``, ``"gelu"``, ``"sigmoid"`` or ``"mixture"`` (module docstring).
    mixture : sequence of str
        The activations mixed by ``"mixture"``.
    """

    def __init__(
        self,
        input_dim: int,
        hidden: Sequence[int] = (),
        features: int | None = None,
        activation: str = "tanh",
        mixture: Sequence[str] = MIXTURE_ACTIVATIONS,
    ):
        if (
            isinstance(input_dim, bool)
            or not isinstance(input_dim, int | np.integer)
            or input_dim < 1
        ):
            raise ValueError(f"`input_dim` must be a positive integer, got {input_dim!r}")
        if isinstance(hidden, int | np.integer):
            hidden = (int(hidden),)
        try:
            hidden = tuple(hidden)
        except TypeError:
            raise ValueError(
                f"`hidden` must be a sequence of positive integers, got {hidden!r}"
            ) from None
        for h in hidden:
            if isinstance(h, bool) or not isinstance(h, int | np.integer) or h < 1:
                raise ValueError(
                    f"`hidden` must be a sequence of positive integers, got {hidden!r}"
                )
        if features is not None and (
            isinstance(features, bool) or not isinstance(features, int | np.integer) or features < 1
        ):
            raise ValueError(f"`features` must be a positive integer or None, got {features!r}")
        if activation != "mixture":
            get_activation(activation)  # validates the name
        if isinstance(mixture, str):
            mixture = (mixture,)
        try:
            mixture = tuple(mixture)
        except TypeError:
            raise ValueError(
                f"`mixture` must be a sequence of activation names, got {mixture!r}"
            ) from None
        if activation == "mixture":
            if not mixture:
                raise ValueError("`mixture` must name at least one activation")
            for m in mixture:
                get_activation(m)
        self.input_dim = int(input_dim)
        self.hidden = tuple(int(h) for h in hidden)
        self.n_features = None if features is None else int(features)
        self.activation = activation
        self.mixture = mixture
        params: list[Param] = []
        d_in = self.input_dim
        for layer, width in enumerate(self.hidden):
            params.append(Param(f"W{layer}", (d_in, width), "weight", layer))
            params.append(Param(f"b{layer}", (width,), "bias", layer))
            if activation == "mixture":
                params.append(Param(f"lam{layer}", (width, len(mixture)), "mixture", layer))
            d_in = width
        if self.n_features is not None:
            params.append(Param("W_out", (d_in, self.n_features), "weight", -1))
            params.append(Param("b_out", (self.n_features,), "bias", -1))
            d_in = self.n_features
        self.params = params
        self.output_dim = d_in

    @property
    def is_identity(self) -> bool:
        return not self.params

    @property
    def size(self) -> int:
        """The number of scalar parameters."""
        return int(sum(np.prod(p.shape, dtype=int) for p in self.params))

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random initial parameters (module docstring)."""
        out = {}
        for p in self.params:
            if p.kind == "weight":
                out[p.name] = rng.normal(0.0, np.sqrt(1.0 / p.shape[0]), size=p.shape)
            elif p.kind == "bias":
                out[p.name] = (
                    rng.normal(0.0, 1.0, size=p.shape) if p.layer >= 0 else np.zeros(p.shape)
                )
            else:  # an even mixture to start with
                out[p.name] = np.full(p.shape, 1.0 / p.shape[1])
        return out

    def forward(self, X, params: Mapping):
        r""":math:`g(X; W)` as a PyTensor graph; ``params`` maps names to tensors or arrays."""
        missing = [p.name for p in self.params if p.name not in params]
        if missing:
            raise ValueError(f"`params` is missing {missing}")
        h = pt.as_tensor_variable(X)
        for layer in range(len(self.hidden)):
            a = pt.dot(h, params[f"W{layer}"]) + params[f"b{layer}"]
            if self.activation == "mixture":
                lam = pt.as_tensor_variable(params[f"lam{layer}"])
                h = sum(lam[:, m] * ACTIVATIONS[name](a) for m, name in enumerate(self.mixture))
            else:
                h = ACTIVATIONS[self.activation](a)
        if self.n_features is not None:
            h = pt.dot(h, params["W_out"]) + params["b_out"]
        return h

    def __repr__(self) -> str:
        if self.is_identity:
            return f"FeatureExtractor(identity, D={self.input_dim})"
        return (
            f"FeatureExtractor(D={self.input_dim}, hidden={self.hidden}, "
            f"features={self.n_features}, activation={self.activation!r})"
        )
