"""Secrets kept out of everything the suite writes: one redaction for every output path.

The run log (manifest, records, traces, spend journal), the response cache, error messages and the command
line's lines all pass their text through `redact_credentials` before it leaves the process:

- the password of every URL (`scheme://user:***@host`), credential-like URL parameters (`?api_key=***`) and
  Authorization header values that look like credentials (`Bearer ***`, `Basic ***`);
- every secret registered in this process (`register_secret`: the run's API keys, a URL's password, the
  PostgreSQL roles' passwords), in the forms it comes back in (JSON-, URL-, CSV- and HTML-escaped, base64,
  a Basic auth header) and any piece of it of 8 or more characters from its start (a secret cut short);
- the values a caller names (`redact_credentials(text, key)`: a provider's own key, registered or not).

The registry is process-wide on purpose: a secret registered where it is read (a model's key, a database's
password) is masked in every file any thread writes afterwards. Registering only adds; the tuples are replaced
whole, so readers need no lock.
"""

from __future__ import annotations

import base64
import html
import json
import re
from urllib.parse import quote, quote_plus

MASK = "***"

# user:password@ in any URL (matched from its "://", a literal the regex engine finds fast; a scheme before it
# is not required, so anything a scheme-anchored pattern masks is masked), and credential-like query
# parameters (…?api_key=…).
_URL_PASSWORD = re.compile(r"(://[^\s/:@\"']*):([^\s/@\"']*)@")  # an empty user too: http://:pw@host
# as a query (?k=v&k=v), path (;k=v) or fragment (#k=v) parameter
_URL_SECRET_PARAMETER = re.compile(r"([?&;#](?:api[_-]?key|key|token|access_token|password|secret)=)[^&;#\s\"']+", re.I)
# An Authorization header's value (`Bearer sk-…`, `Basic YWxp…`) echoed back by a server or a proxy.
_HEADER_CREDENTIAL = re.compile(r"\b(Bearer|Basic)(\s+)([A-Za-z0-9._~+/=-]{8,})")


def _header_value(match: re.Match[str]) -> str:
    """The header masked when its value looks like a credential (prose such as "Basic statistics" stays):
    Basic: base64 of `user:password`; Bearer: a token with a digit."""
    scheme, space, value = match.groups()
    if scheme == "Basic":
        try:
            secret = b":" in base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except ValueError:
            secret = False
    else:
        secret = any(c.isdigit() for c in value)
    return f"{scheme}{space}{MASK}" if secret else match.group(0)


_MIN_SECRET = 5  # a shorter "secret" would mask ordinary words everywhere
_MIN_PREFIX = 8  # a secret cut short (a 300-character summary) is masked from this many characters on
_secrets: tuple[str, ...] = ()  # longest first; only ever replaced whole, so readers need no lock
_prefixes: tuple[tuple[str, str], ...] = ()  # (first _MIN_PREFIX characters, the form) of each long form


def secret_forms(value: str) -> set[str]:
    """`value` as it appears once written somewhere: JSON-escaped (a `"` or `\\` in it), URL-escaped, doubled
    quotes (CSV) and HTML-escaped (report.html)."""
    forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]}
    forms |= {quote(value, safe=""), quote_plus(value), value.replace('"', '""'), html.escape(value)}
    return forms


def register_secret(value: str | None, *, user: str | None = None) -> None:
    """Mask `value` (an API key, a URL's password) in everything redacted from now on, with the forms
    it comes back in (`secret_forms`), base64 of it and, with `user`, base64 of `user:value` (a Basic
    auth header); and any piece of 8 or more characters from the start of one of them."""
    global _secrets, _prefixes
    if not value or len(value) < _MIN_SECRET:
        return
    raw = [value, f"{user}:{value}"] if user is not None else [value]
    encoded = [base64.b64encode(item.encode()).decode() for item in raw]
    urlsafe = [item.replace("+", "-").replace("/", "_") for item in encoded]
    forms = {*secret_forms(value), *encoded, *urlsafe, *(item.rstrip("=") for item in [*encoded, *urlsafe])}
    _secrets = tuple(sorted(set(_secrets) | forms, key=len, reverse=True))
    long_forms = {(form[:_MIN_PREFIX], form) for form in _secrets if len(form) > _MIN_PREFIX}
    _prefixes = tuple(sorted(long_forms, key=lambda pair: len(pair[1]), reverse=True))


def _mask_prefixes(text: str, head: str, form: str) -> str:
    """Every run of `form`'s leading characters in `text` that is at least `head` long, masked."""
    pieces, start = [], 0
    found = text.find(head)
    while found >= 0:
        end = found + len(head)
        while end < len(text) and end - found < len(form) and text[end] == form[end - found]:
            end += 1
        pieces += [text[start:found], MASK]
        start = end
        found = text.find(head, end)
    return "".join(pieces) + text[start:]


def redact_credentials(text: str, *values: str | None) -> str:
    """`text` with the password of every URL (`scheme://user:***@host`), credential query parameters,
    Authorization header values, every registered secret (`register_secret`) and each of `values` (in the
    forms it is written in; of any length: the caller knows it is a secret) masked. Everything the run log
    and the reports write passes through here; so do error messages."""
    # Each pattern runs only where its literal part occurs: most text (every record and trace) has none, and
    # a substring test costs a fraction of a regex scan.
    if "@" in text and "://" in text:
        text = _URL_PASSWORD.sub(r"\1:***@", text)
    if "=" in text:
        text = _URL_SECRET_PARAMETER.sub(r"\1***", text)
    if "Bearer" in text or "Basic" in text:
        text = _HEADER_CREDENTIAL.sub(_header_value, text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    for head, form in _prefixes:  # what is left of a secret cut short
        if head in text:
            text = _mask_prefixes(text, head, form)
    for value in values:
        for form in sorted(secret_forms(value), key=len, reverse=True) if value else ():
            text = text.replace(form, MASK)
    return text
