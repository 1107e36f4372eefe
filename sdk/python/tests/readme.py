"""The README's code blocks, for the tests that run its snippets as written:
reading them from README.md (not from a copy) is what keeps the two the same.
"""

from __future__ import annotations

import os
import re

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "README.md")


def blocks(heading: str, lang: str = "python") -> list[str]:
    """The fenced ``lang`` blocks of the README section titled ``heading``, up
    to the next heading of any level, in order."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    m = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    if m is None:
        raise LookupError(f"README.md has no section {heading!r}")
    found = re.findall(rf"^```{re.escape(lang)}\n(.*?)^```$", m.group(1), re.M | re.S)
    if not found:
        raise LookupError(f"README.md's section {heading!r} has no {lang} block")
    return found
