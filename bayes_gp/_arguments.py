"""Errors about a caller's arguments, worded for whoever made the call.

The library's messages name a parameter as the rest of the package does, in backticks
(`` `method` ``, `` `likelihood` 'binomial' ``); the ``bayes-gp`` command line names it by its
option (``--method``, ``--likelihood binomial``). An :class:`ArgumentError` keeps its message as a
template whose fields are the parameters it names, so that the one message reads right in either
place: ``str(error)`` words it for Python callers, :meth:`ArgumentError.worded` for any other
interface (:mod:`bayes_gp.cli` passes its option names).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

__all__ = ["ArgumentError", "Words", "python_words", "renamed_argument"]

#: How an interface names a parameter: ``words(parameter, values, joiner)`` gives the text for
#: ``parameter`` alone (``values`` empty) or with the values it was given or may take, joined
#: by ``joiner`` (``", "`` for a list, ``" or "`` for alternatives).
Words = Callable[[str, tuple[str, ...], str], str]


def python_words(parameter: str, values: tuple[str, ...], joiner: str) -> str:
    """A parameter as the library's messages name it: `` `trials` ``,
    `` `likelihood` 'binomial' ``, `` `method` 'nuts', 'map' ``.

    Parameters
    ----------
    parameter : str
        The parameter's name.
    values : tuple of str
        Values it was given or may take (may be empty).
    joiner : str
        What goes between two values.

    Returns
    -------
    str
    """
    name = f"`{parameter}`"
    return f"{name} {joiner.join(map(repr, values))}" if values else name


class _Named:
    """A template field that names a parameter; its format spec lists values (``a|b``: either
    one, ``a,b``: a list)."""

    def __init__(self, parameter: str, words: Words):
        self.parameter, self.words = parameter, words

    def __format__(self, spec: str) -> str:
        joiner, sep = (" or ", "|") if "|" in spec else (", ", ",")
        values = tuple(v.strip() for v in spec.split(sep)) if spec else ()
        return self.words(self.parameter, values, joiner)


class ArgumentError(ValueError):
    """A bad argument, or a bad combination of arguments, with a message that names parameters
    through a template, so that each interface words them its own way.

    Parameters
    ----------
    template : str
        A :meth:`str.format` template. A field named after one of ``params`` names that
        parameter: ``{trials}`` alone, ``{likelihood:binomial}`` with a value,
        ``{likelihood:poisson|negative_binomial}`` with alternatives, ``{method:nuts,map}`` with
        a list (values written in the template are names from the code, never user data). Any
        other field is one of ``values``: the user's data goes there.
    params : tuple of str
        The parameters the message names, in the order they matter (the first is the one at
        fault).
    **values
        The template's other fields.

    Attributes
    ----------
    template, params, values
        As given.
    parameter : str
        The parameter at fault (``params[0]``).

    Examples
    --------
    >>> err = ArgumentError("{likelihood:binomial} needs {trials}", ("likelihood", "trials"))
    >>> str(err)
    "`likelihood` 'binomial' needs `trials`"
    >>> err.worded(lambda p, vs, j: " ".join(["--" + p, j.join(vs)]).strip())
    '--likelihood binomial needs --trials'
    """

    def __init__(self, template: str, params: tuple[str, ...], /, **values):
        self.template = template
        self.params = tuple(params)
        self.values = values
        super().__init__(self.worded(python_words))

    @property
    def parameter(self) -> str:
        return self.params[0]

    def worded(self, words: Words) -> str:
        """The message with each parameter named by ``words``.

        Parameters
        ----------
        words : callable
            ``words(parameter, values, joiner) -> str`` (see :data:`Words`).

        Returns
        -------
        str
        """
        fields = {p: _Named(p, words) for p in self.params}
        return self.template.format(**fields, **self.values)

    def __reduce__(self):
        return _restore, (self.template, self.params, self.values)


def _restore(template: str, params: tuple[str, ...], values: dict) -> ArgumentError:
    """Unpickle an :class:`ArgumentError` (its constructor takes the template, not the text)."""
    return ArgumentError(template, params, **values)


def renamed_argument(old: str, new: str) -> Callable[[Callable], Callable]:
    """Decorate a function whose keyword argument ``old`` is now called ``new``: for one release
    ``old=`` still works, with a ``FutureWarning`` that names ``new``; both at once are refused.

    ``@renamed_argument("seed", "random_seed")`` on ``replicate(self, fit, n_draws,
    random_seed=0)`` keeps ``replicate(fit, 10, seed=1)`` working as ``random_seed=1``.
    """

    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(
                        f"{function.__qualname__}() got `{old}` and `{new}`: `{old}` is the old "
                        f"name of `{new}`; give `{new}` only"
                    )
                warnings.warn(
                    f"{function.__qualname__}(): `{old}=` is renamed `{new}=` (one name across "
                    f"bayes_gp); `{old}=` will stop working in the next release",
                    FutureWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return wrapper

    return decorate
