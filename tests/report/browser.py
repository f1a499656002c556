"""Render a report in headless Chromium and read back what the browser saw.

The report has no scripts of its own. For the check, a copy of the page gets one script as the
first element of its ``<head>``: it records every error the page raises (script errors, resources
that fail to load, ``console.error``/``console.warn``), checks at the load event that every
image decoded, and writes what it measured as JSON into a ``<pre id="bgp-browser-check">``
element; Chromium's ``--dump-dom`` prints the page after that (tried up to three times: on a
loaded machine a run can end before the load event). No browser driver or extra Python package is needed.

Chromium is Debian's ``chromium`` package; ``./run test`` installs it when it is missing.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
RESULT_ID = "bgp-browser-check"
WINDOW = (1400, 1000)

_PROBE = """
<script>
(function () {
  const errors = [];
  window.addEventListener("error", (e) => {
    const t = e.target;
    errors.push(t && t !== window && t.tagName
      ? "failed to load <" + t.tagName.toLowerCase() + ">"
      : "script error: " + e.message);
  }, true);
  window.addEventListener("unhandledrejection", (e) => errors.push("rejection: " + e.reason));
  for (const level of ["error", "warn"]) {
    const orig = console[level];
    console[level] = function (...args) { errors.push("console." + level + ": " + args.join(" "));
      return orig.apply(console, args); };
  }
  window.addEventListener("load", () => {
    // at the load event every data: image has been fetched; a PNG that did not decode has
    // naturalWidth 0 (and raised an error event above)
    const imgs = Array.from(document.images);
    const decoded = imgs.map((im) => im.complete && im.naturalWidth > 0);
    const report = document.querySelector(".bgp-report");
    const out = {
      errors: errors,
      innerWidth: window.innerWidth,
      reportWidth: report ? report.getBoundingClientRect().width : 0,
      images: imgs.map((im, i) => {
        const r = im.getBoundingClientRect(), s = getComputedStyle(im);
        const cap = im.closest("figure") && im.closest("figure").querySelector("figcaption");
        return { decoded: decoded[i], complete: im.complete, naturalWidth: im.naturalWidth,
          naturalHeight: im.naturalHeight, width: r.width, height: r.height,
          visible: s.display !== "none" && s.visibility !== "hidden" && r.width > 0 && r.height > 0,
          caption: cap ? cap.textContent : "" };
      }),
      tables: Array.from(document.querySelectorAll("table")).map((t) => {
        let h = t.previousElementSibling;
        while (h && !/^H[1-6]$/.test(h.tagName)) { h = h.previousElementSibling; }
        if (!h) { const sec = t.closest("section"); h = sec && sec.querySelector("h1,h2,h3,h4"); }
        return { heading: h ? h.textContent : "", rows: t.tBodies.length ? t.tBodies[0].rows.length : 0,
          columns: t.rows.length ? t.rows[0].cells.length : 0,
          width: t.getBoundingClientRect().width };
      }),
    };
    const pre = document.createElement("pre");
    pre.id = "__RESULT_ID__";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  });
})();
</script>
""".replace("__RESULT_ID__", RESULT_ID)


def find_chromium() -> str:
    """Path of a Chromium executable, or ``RuntimeError`` saying how to get one."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError(
        "headless Chromium is needed to test the report in a browser and none was found: "
        "`./run test` installs Debian's `chromium` package (apt-get install chromium)"
    )


def render(page: str, screenshot: str | Path | None = None, window=WINDOW) -> dict:
    """Open the HTML document ``page`` (a string) in headless Chromium; return the probe's
    measurements (see the module docstring). ``screenshot``: also save a PNG of the window."""
    exe = find_chromium()
    if "<head>" not in page:
        raise ValueError("`page` must be a whole HTML document with a <head>")
    probed = page.replace("<head>", "<head>" + _PROBE, 1)
    with tempfile.TemporaryDirectory(prefix="bgp-chromium-") as tmp:
        path = Path(tmp) / "report.html"
        path.write_text(probed, encoding="utf-8")
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={tmp}/profile",
            f"--window-size={window[0]},{window[1]}", "--virtual-time-budget=10000",
        ]  # fmt: skip
        for _ in range(3):
            run = subprocess.run(
                [exe, *flags, "--dump-dom", path.as_uri()],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            match = re.search(rf'<pre id="{RESULT_ID}">(.*?)</pre>', run.stdout, re.S)
            if match is not None:
                break
        if screenshot is not None:
            subprocess.run(
                [exe, *flags, f"--screenshot={Path(screenshot).resolve()}", path.as_uri()],
                capture_output=True, timeout=120, check=True,
            )  # fmt: skip
    if match is None:
        raise RuntimeError(
            f"Chromium did not run the page's check (exit {run.returncode}): {run.stderr[-2000:]}"
        )
    return json.loads(html.unescape(match.group(1)))
