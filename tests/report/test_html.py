"""HTML assembly: escaping, number formatting, embedded figures only."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from bayes_gp.report import html as H
from bayes_gp.report.diagnostics import Verdict


def test_fmt_number():
    assert H.fmt_number(1.23456789) == "1.235"
    assert H.fmt_number(0.000123) == "1.230e-04"
    assert H.fmt_number(123456.0) == "1.235e+05"
    assert H.fmt_number(0.0) == "0"
    assert H.fmt_number(np.int64(7)) == "7"
    assert H.fmt_number(399.9, "int") == "399"  # ESS rounded down
    assert H.fmt_number(1.004999, "rhat") == "1.005"
    assert H.fmt_number(float("nan")) == H.fmt_number(None) == "–"
    assert H.fmt_number(np.True_) == "yes"
    assert H.fmt_number(np.array([1.0, 2.5])) == "[1, 2.5]"


def test_tables_escape_every_text():
    df = pd.DataFrame({"<b>mean</b>": [1.5]}, index=["<script>alert(1)</script>"])
    out = H.dataframe_table(df, "param & co")
    assert "<script>" not in out and "<b>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "&lt;b&gt;mean&lt;/b&gt;" in out
    assert "param &amp; co" in out
    assert "<td>1.5</td>" in out
    v = Verdict("r̂ <x>", 1.2, "≤ 1.01", "fail", 'say "no" <now>', "d&d")
    out = H.verdict_table([v])
    assert '<tr class="fail">' in out
    assert "r̂ &lt;x&gt;" in out and "say &quot;no&quot; &lt;now&gt;" in out and "d&amp;d" in out


def test_figures_must_be_data_uris():
    assert H.figure(H.DATA_URI_PREFIX + "AAAA", "a <caption>").count("&lt;caption&gt;") == 2
    for bad in ("https://example.org/x.png", "file:///x.png", "x.png", "data:text/html,<b>"):
        with pytest.raises(ValueError, match="data:image/png"):
            H.figure(bad, "x")


def test_document_is_self_contained():
    doc = H.document("<T>", H.section("S & s", H.paragraph("p < q")))
    assert doc.startswith("<!DOCTYPE html>")
    assert "<title>&lt;T&gt;</title>" in doc
    assert "<h2>S &amp; s</h2>" in doc and "<p>p &lt; q</p>" in doc
    assert not re.search(r"<(script|link|iframe)\b", doc)
    assert "http" not in doc and "url(" not in doc
    frag = H.fragment("<p>x</p>")
    assert frag.startswith('<div class="bgp-report"><style>') and "<html" not in frag
