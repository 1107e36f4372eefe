"""The documentation's code blocks, for the tests that run its snippets as
written: reading them from README.md and docs/*.md (not from a copy) is what
keeps the two the same.
"""

from __future__ import annotations

import glob
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
README = os.path.join(ROOT, "README.md")


def blocks(heading: str, lang: str = "python") -> list[str]:
    """The fenced ``lang`` blocks of the section titled ``heading`` (in
    README.md or, where the README has none, the first of docs/*.md that
    has one), up to the next heading of any level, in order."""
    m = None
    for path in [README, *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        m = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
        if m is not None:
            break
    if m is None:
        raise LookupError(f"neither README.md nor docs/*.md has a section {heading!r}")
    found = re.findall(rf"^```{re.escape(lang)}\n(.*?)^```$", m.group(1), re.M | re.S)
    if not found:
        raise LookupError(f"the section {heading!r} has no {lang} block")
    return found
