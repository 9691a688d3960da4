"""PostgreSQL URLs: a role's credentials, a URL moved to another database, the agent's clean
URL, and passwords masked or registered as secrets for the run log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ...core.runlog import register_secret


@dataclass(frozen=True)
class Role:
    """A login role and its password."""

    name: str
    password: str


def with_dbname(url: str, dbname: str) -> str:
    """`url` pointing at database `dbname`, in the form it came in: a postgresql:// URL stays one
    (the tools expect one), its host, role and query string kept (a `dbname` in the query string
    would override the path, so it goes); a key=value conninfo gets its `dbname` replaced."""
    if "://" not in url:
        return make_conninfo(url, dbname=dbname)
    base, _, query = url.partition("?")
    scheme, _, rest = base.partition("://")
    authority = rest.split("/", 1)[0]
    kept = [pair for pair in query.split("&") if pair and unquote(pair.partition("=")[0]) != "dbname"]
    return f"{scheme}://{authority}/{quote(dbname, safe='')}" + (f"?{'&'.join(kept)}" if kept else "")


def server_address(con: psycopg.Connection[Any]) -> tuple[str, int]:
    """Where `con` is connected (host or socket folder, and port), whatever URL, service file or
    environment variable said so."""
    return con.info.host, con.info.port


def clean_url(address: tuple[str, int], role: Role, dbname: str) -> str:
    """A URL naming only `address`, `role` (user and password) and `dbname`: no query string, so no
    `?user=` or `?options=` of another URL can change who connects or how."""
    host, port = address
    shown_host = quote(host, safe="") if host.startswith("/") else (f"[{host}]" if ":" in host else host)
    user = f"{quote(role.name, safe='')}:{quote(role.password, safe='')}@"
    return f"postgresql://{user}{shown_host}:{port}/{quote(dbname, safe='')}"


MASK = "***"
_PASSWORD_KEYS = {"password", "passfile", "sslpassword"}


def url_without_password(url: str) -> str:
    """`url` (a postgresql:// URL or a key=value conninfo) with every password replaced by MASK,
    parsed rather than pattern-matched, so that no character of a password (a quote, an `@`)
    leaves a part of it behind. What cannot be parsed is replaced whole."""
    if "://" not in url:
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            return MASK
        return make_conninfo(**{k: MASK if k in _PASSWORD_KEYS else v for k, v in params.items()})
    scheme, _, rest = url.partition("://")
    authority, slash, path_and_query = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if ":" in userinfo:
        userinfo = userinfo.partition(":")[0] + ":" + MASK
    path, question, query = path_and_query.partition("?")
    if question:
        pairs = [pair.partition("=") for pair in query.split("&")]
        query = "&".join(f"{k}={MASK}" if unquote(k) in _PASSWORD_KEYS else k + eq + v for k, eq, v in pairs)
    return f"{scheme}://{userinfo}{at}{hosts}{slash}{path}{question}{query}"


def password_masked(url: str | None) -> bool:
    """Whether `url` carries a password the manifest masked (a resumed run's recorded URL)."""
    try:
        return bool(url) and MASK in str(conninfo_to_dict(url or "").get("password", ""))
    except psycopg.ProgrammingError:
        return False


def register_url_secrets(url: str | None) -> None:
    """Mask the passwords `url` carries in everything the run log writes from now on."""
    if not url:
        return
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return
    for key in _PASSWORD_KEYS & params.keys():
        register_secret(str(params[key]))
        register_secret(quote(str(params[key]), safe=""))
