"""A cheap scanner for text that must not reach long-term memory: secrets and personal
data (agent-loop §9: `REJECTED(PRIVACY)` for `self_md_patch`, and `kb_request` asserts
"no_pii_no_secrets"). It looks for shapes, not meaning: vendor API keys, private key
blocks, credentials written as `password = …`, e-mail addresses and card-like numbers.
A hit names what was found, never the value.
"""

from __future__ import annotations

import re

from mindloop.config.problems import looks_like_secret

_CHECKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (
        re.compile(
            r"(?i)\b(password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
            r"\s*[:=]\s*['\"]?[^\s'\"]{6,}"
        ),
        "a credential",
    ),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "an AWS access key"),
    (re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)*\.[A-Za-z]{2,}"), "an e-mail address"),
    (re.compile(r"\b(?:\d[ -]?){13,19}\b"), "a card-like number"),
)


def privacy_problem(text: str) -> str | None:
    """What in `text` looks like a secret or personal data, or None."""
    for token in text.split():
        if looks_like_secret(token.strip("`'\"()[]{}<>,;")):
            return "an API key"
    for pattern, what in _CHECKS:
        if pattern.search(text):
            return what
    return None
