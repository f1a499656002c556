"""Assembling the report's HTML: every text escaped, figures as ``data:`` URIs, no external
resources (no scripts, style sheets, fonts or links), one scoped style block.

The same body is used as a standalone document (:func:`document`, for ``report.html``) and as
a fragment for Jupyter (:func:`fragment`, whose style is scoped under ``.bgp-report``).
"""

from __future__ import annotations

import html as _html
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "esc",
    "fmt_number",
    "table",
    "dataframe_table",
    "key_value_table",
    "figure",
    "section",
    "paragraph",
    "verdict_table",
    "document",
    "fragment",
    "DATA_URI_PREFIX",
]

DATA_URI_PREFIX = "data:image/png;base64,"

_STYLE = """
.bgp-report { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 14px;
  line-height: 1.4; color: #1f2328; box-sizing: border-box; width: 100%; padding: 0 1em; }
.bgp-report h1 { font-size: 1.6em; margin: 0.4em 0; }
.bgp-report h2 { font-size: 1.3em; margin: 1.2em 0 0.4em; border-bottom: 1px solid #d0d7de; }
.bgp-report h3 { font-size: 1.1em; margin: 1em 0 0.3em; }
.bgp-report table { border-collapse: collapse; margin: 0.4em 0 0.8em; font-size: 0.92em; }
.bgp-report th, .bgp-report td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: right;
  vertical-align: top; }
.bgp-report th { background: #f6f8fa; }
.bgp-report td.text, .bgp-report th.text { text-align: left; }
.bgp-report .ok { background: #dafbe1; }
.bgp-report .warn { background: #fff8c5; }
.bgp-report .fail { background: #ffebe9; }
.bgp-report .na { background: #f6f8fa; color: #57606a; }
.bgp-report figure { margin: 0.6em 0 1em; }
.bgp-report figure img { max-width: 100%; height: auto; border: 1px solid #eaeef2; }
.bgp-report figcaption { font-size: 0.9em; color: #57606a; }
.bgp-report p.note { color: #57606a; }
.bgp-report code, .bgp-report pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace;
  font-size: 0.92em; }
.bgp-report pre { background: #f6f8fa; padding: 6px 8px; overflow-x: auto; }
"""


def esc(value) -> str:
    """HTML-escape ``str(value)`` (``&``, ``<``, ``>`` and both quotes)."""
    return _html.escape(str(value), quote=True)


def fmt_number(value, kind: str = "g") -> str:
    """Format a number for a table cell (plain text, not escaped).

    ``kind``: ``"g"`` (4 significant digits, scientific outside [1e-3, 1e5)), ``"int"`` (rounded
    down, as ESS is conventionally shown), ``"rhat"`` (3 decimals). ``None`` and NaN give ``"–"``;
    booleans ``"yes"``/``"no"``; other objects ``str``.
    """
    if value is None:
        return "–"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isnan(v):
            return "–"
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        if kind == "int":
            return str(math.floor(v))
        if kind == "rhat":
            return f"{v:.3f}"
        if v != 0 and not 1e-3 <= abs(v) < 1e5:
            return f"{v:.3e}"
        return f"{v:.4g}"
    if isinstance(value, np.ndarray):
        return "[" + ", ".join(fmt_number(v, kind) for v in value.ravel()) + "]"
    return str(value)


def _cell(value, formatter: Callable | None, tag: str = "td", css: str = "") -> str:
    is_number = isinstance(value, numbers.Number | np.ndarray) or value is None
    text = formatter(value) if formatter is not None else fmt_number(value)
    classes = " ".join(c for c in ((css,) if css else ()) + (() if is_number else ("text",)))
    attr = f' class="{esc(classes)}"' if classes else ""
    return f"<{tag}{attr}>{esc(text)}</{tag}>"


def table(
    header: Sequence[str] | None,
    rows: Iterable[Sequence],
    *,
    formats: Mapping[int, Callable] | None = None,
    row_classes: Sequence[str] | None = None,
) -> str:
    """An HTML table; ``formats`` maps a column index to a formatter ``value -> str``;
    ``header=None``: no header row."""
    formats = dict(formats or {})
    head = "" if header is None else "".join(f'<th class="text">{esc(h)}</th>' for h in header)
    body = []
    for i, row in enumerate(rows):
        css = row_classes[i] if row_classes is not None else ""
        cells = "".join(_cell(v, formats.get(j)) for j, v in enumerate(row))
        body.append(f'<tr class="{esc(css)}">{cells}</tr>' if css else f"<tr>{cells}</tr>")
    thead = f"<thead><tr>{head}</tr></thead>" if head else ""
    return f"<table>{thead}<tbody>{''.join(body)}</tbody></table>"


def _column_format(name: str) -> Callable:
    name = str(name)
    if name.startswith("ess"):
        return lambda v: fmt_number(v, "int")
    if name in ("r_hat", "rhat"):
        return lambda v: fmt_number(v, "rhat")
    return fmt_number


def fmt_input(value) -> str:
    """An input value as given: up to 12 significant digits, so that inputs such as decimal
    years (1990.0416666667) keep their precision (``fmt_number`` shows 4 digits: 1990)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_):
        v = float(value)
        if math.isfinite(v):
            return f"{v:.12g}"
    return fmt_number(value)


def dataframe_table(
    df, index_name: str = "", *, formats: Mapping[str, Callable] | None = None
) -> str:
    """A ``pandas.DataFrame`` as an HTML table: index first, ESS columns as integers, r̂ with 3
    decimals, other numbers with 4 significant digits; ``formats`` maps a column name to its own
    formatter ``value -> str`` (e.g. :func:`fmt_input`)."""
    header = [index_name or (df.index.name or ""), *[str(c) for c in df.columns]]
    by_name = dict(formats or {})
    formats = {j + 1: by_name.get(str(c)) or _column_format(c) for j, c in enumerate(df.columns)}
    formats[0] = str
    rows = []
    for idx, row in zip(df.index, df.itertuples(index=False), strict=True):
        label = " / ".join(str(i) for i in idx) if isinstance(idx, tuple) else str(idx)
        rows.append([label, *row])
    return table(header, rows, formats=formats)


def key_value_table(items: Iterable[tuple[str, object]]) -> str:
    """Two-column table of names and values (values formatted by :func:`fmt_number`)."""
    return table(None, [[str(k), v] for k, v in items], formats={0: str})


def figure(uri: str, caption: str) -> str:
    """An embedded PNG figure; ``uri`` must be a ``data:image/png;base64,`` URI."""
    if not uri.startswith(DATA_URI_PREFIX):
        raise ValueError("figures must be embedded as data:image/png;base64 URIs")
    return (
        f'<figure><img src="{uri}" alt="{esc(caption)}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def paragraph(text: str, note: bool = False) -> str:
    """An escaped paragraph (``note``: greyed)."""
    return f'<p class="note">{esc(text)}</p>' if note else f"<p>{esc(text)}</p>"


def section(title: str, body: str, level: int = 2) -> str:
    """A heading (escaped) followed by ``body`` (already HTML)."""
    return f"<section><h{level}>{esc(title)}</h{level}>{body}</section>"


def verdict_table(verdicts, with_subject: bool = False) -> str:
    """Diagnostic verdicts as a table with coloured status cells."""
    header = ["check", "value", "threshold", "status", "detail", "what to do"]
    if with_subject:
        header = ["model", *header]
    rows, classes = [], []
    for v in verdicts:
        row = [v.check, v.value, v.threshold, v.status, v.detail, v.advice or "–"]
        rows.append([v.subject, *row] if with_subject else row)
        classes.append("na" if v.status == "n/a" else v.status)
    return table(header, rows, formats={0: str}, row_classes=classes)


def document(title: str, body: str) -> str:
    """A standalone HTML5 document (no external resources)."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f'<div class="bgp-report">\n{body}\n</div>\n</body>\n</html>\n'
    )


def fragment(body: str) -> str:
    """The report body for inline display (Jupyter), with its scoped style."""
    return f'<div class="bgp-report"><style>{_STYLE}</style>\n{body}\n</div>'
