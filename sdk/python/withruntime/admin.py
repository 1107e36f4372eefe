"""Account-wide resources: secrets, API keys, usage, accounts and trials.

    from withruntime import Client

    c = Client()                                  # WITHRUNTIME_API_KEY / WITHRUNTIME_BASE_URL
    c.secrets.set("OPENAI_API_KEY", value, host="api.openai.com")
    key = c.keys.create(read_only=True, name="ci")   # key.secret: shown this once
    print(c.usage(from_="2026-01-01").cost_micros)

The names follow the Go client (client.SetSecret, ListKeys, Usage, ...)
in Python style: ``c.secrets.set/list/remove``, ``c.keys.create/list/remove``,
``c.usage(...)``, ``c.accounts.create/list``, ``c.trial()``. Secret values
go in and never come back: no call returns one, and the only secret that
ever comes out is a new key's, in the answer to its creation.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any, List

from ._time import parse_time
from ._transport import Transport

__all__ = [
    "Client",
    "Secrets",
    "Keys",
    "Accounts",
    "SecretInfo",
    "Key",
    "Account",
    "Usage",
    "UsageRow",
    "Trial",
]

KEY_KINDS = ("full", "read_only", "admin")
KEY_FORMATS = ("withruntime", "e2b")


@dataclass(frozen=True)
class SecretInfo:
    """A stored secret as the API shows it: its name and host, never its value."""

    name: str
    host: str
    updated_at: datetime | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SecretInfo:
        return cls(name=str(d.get("name") or ""), host=str(d.get("host") or ""),
                   updated_at=parse_time(d.get("updated_at")))


@dataclass(frozen=True)
class Key:
    """An API key as the API shows it.

    ``kind`` is ``full``, ``read_only`` or ``admin``; ``daily_limit_micros``
    (0: none) is in USD millionths; ``parent`` is the id of the key that made
    it (empty: the admin key did). ``secret`` is the key itself, set only on
    the Key that ``Keys.create`` returns (the server keeps only its hash);
    it is left out of ``repr`` so that logging a Key does not leak it.
    """

    id: str
    account: str
    kind: str
    name: str = ""
    daily_limit_micros: int = 0
    parent: str = ""
    created_at: datetime | None = None
    secret: str = field(default="", repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Key:
        return cls(
            id=str(d.get("id") or ""),
            account=str(d.get("account") or ""),
            kind=str(d.get("kind") or ""),
            name=str(d.get("name") or ""),
            daily_limit_micros=int(d.get("daily_limit_micros") or 0),
            parent=str(d.get("parent") or ""),
            created_at=parse_time(d.get("created_at")),
            secret=str(d.get("key") or ""),
        )


@dataclass(frozen=True)
class Account:
    """An account (the API's Account). ``trial_hours`` is the free sandbox
    time of a trial account (0: not a trial), ``trial_used_hours`` what its
    sandboxes have run so far."""

    id: str
    name: str
    concurrency: int = 0
    trial_hours: float = 0.0
    trial_used_hours: float = 0.0
    created_at: datetime | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Account:
        return cls(
            id=str(d.get("id") or ""),
            name=str(d.get("name") or ""),
            concurrency=int(d.get("concurrency") or 0),
            trial_hours=float(d.get("trial_hours") or 0),
            trial_used_hours=float(d.get("trial_used_hours") or 0),
            created_at=parse_time(d.get("created_at")),
        )


@dataclass(frozen=True)
class UsageRow:
    """One UTC day (``day``, YYYY-MM-DD) of one account's key: hours alive,
    CPU hours consumed, memory size times hours alive, and the cost in USD
    millionths."""

    day: str
    account: str
    key_id: str
    sandbox_hours: float = 0.0
    cpu_hours: float = 0.0
    memory_gib_hours: float = 0.0
    cost_micros: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> UsageRow:
        return cls(
            day=str(d.get("day") or ""),
            account=str(d.get("account") or ""),
            key_id=str(d.get("key_id") or ""),
            sandbox_hours=float(d.get("sandbox_hours") or 0),
            cpu_hours=float(d.get("cpu_hours") or 0),
            memory_gib_hours=float(d.get("memory_gib_hours") or 0),
            cost_micros=int(d.get("cost_micros") or 0),
        )


@dataclass(frozen=True)
class Usage:
    """The answer of GET /v1/usage: rows by day, account and key, and their
    total cost in USD millionths."""

    rows: List[UsageRow]
    cost_micros: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Usage:
        return cls(rows=[UsageRow.from_json(r) for r in d.get("rows") or []],
                   cost_micros=int(d.get("cost_micros") or 0))


@dataclass(frozen=True)
class Trial:
    """A new trial account and its full key (``key``, left out of ``repr``)."""

    account: str
    key: str = field(repr=False)
    trial_hours: float = 0.0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Trial:
        return cls(account=str(d.get("account") or ""), key=str(d.get("key") or ""),
                   trial_hours=float(d.get("trial_hours") or 0))


def _name_path(collection: str, name: str, what: str) -> str:
    if not name:
        raise ValueError(f"{what} is empty")
    return f"/{collection}/" + urllib.parse.quote(name, safe="")


def _day(value: str | date | None, what: str) -> str | None:
    """A UTC day as YYYY-MM-DD, from a str, a date or a datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        return value
    raise TypeError(f"{what} must be a date or a YYYY-MM-DD str, not {type(value).__name__}")


def _usd_to_micros(usd: float | str | Decimal) -> int:
    try:
        d = Decimal(str(usd)) * 1_000_000
    except InvalidOperation:
        raise ValueError(f"daily_limit_usd must be a number, got {usd!r}") from None
    if d != d.to_integral_value():
        raise ValueError(f"daily_limit_usd has at most 6 decimal places, got {usd!r}")
    return int(d)


class Secrets:
    """The secrets of the key's account (``Client.secrets``).

    A secret is bound to one host: every command in the account's sandboxes
    sees the variable ``name`` set to a placeholder, and the egress proxy
    puts the value in its place in HTTPS requests to that host only.
    """

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def set(self, name: str, value: str, *, host: str) -> SecretInfo:
        """Store ``value`` as the secret ``name``, bound to ``host`` (a DNS
        name, or ``*.`` and a domain for every name under it), replacing the
        secret of that name if there is one. Returns its name and host; no
        call ever returns the value."""
        if not isinstance(value, str):
            raise TypeError("a secret's value is a str")
        d = self._t.json("PUT", _name_path("secrets", name, "secret name"),
                         json_body={"value": value, "host": host})
        return SecretInfo.from_json(d or {})

    def list(self) -> List[SecretInfo]:
        """The account's secrets: names and hosts, never values."""
        d = self._t.json("GET", "/secrets") or {}
        return [SecretInfo.from_json(s) for s in d.get("secrets") or []]

    def remove(self, name: str) -> None:
        """Remove the secret ``name`` (APIError not_found if there is none);
        commands started afterwards no longer see its placeholder."""
        self._t.json("DELETE", _name_path("secrets", name, "secret name"))


class Keys:
    """API keys (``Client.keys``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def create(
        self,
        *,
        kind: str | None = None,
        read_only: bool = False,
        account: str | None = None,
        name: str | None = None,
        daily_limit_usd: float | str | Decimal | None = None,
        daily_limit_micros: int | None = None,
        format: str | None = None,
    ) -> Key:
        """Create an API key; the returned Key's ``secret`` is the key,
        shown this once.

        ``kind`` is ``full`` (the default) or ``read_only`` (or
        ``read_only=True``); ``admin`` only with the admin key. ``account``
        defaults to the caller's; only the admin key names another. The daily
        spending limit is ``daily_limit_usd`` (at most 6 decimals) or
        ``daily_limit_micros`` (USD millionths); a key made by a key with a
        limit gets at most that limit (none asked: that limit).
        ``format="e2b"`` writes the secret as E2B's keys are written
        (``e2b_`` and hex digits), for programs using E2B's SDKs; the key is
        the same in every other respect. The default is ``withruntime``
        (``wr_...``).
        """
        if format is not None and format not in KEY_FORMATS:
            raise ValueError(f"format must be one of {', '.join(KEY_FORMATS)}, got {format!r}")
        if read_only:
            if kind not in (None, "read_only"):
                raise ValueError(f"read_only=True contradicts kind={kind!r}")
            kind = "read_only"
        if kind is not None and kind not in KEY_KINDS:
            raise ValueError(f"kind must be one of {', '.join(KEY_KINDS)}, got {kind!r}")
        if daily_limit_usd is not None:
            if daily_limit_micros is not None:
                raise ValueError("give daily_limit_usd or daily_limit_micros, not both")
            daily_limit_micros = _usd_to_micros(daily_limit_usd)
        body: dict[str, Any] = {}
        for k, v in (("account", account), ("kind", kind), ("name", name),
                     ("daily_limit_micros", daily_limit_micros)):
            if v:
                body[k] = v
        if format == "e2b":
            # Only then: a server from before formats refuses the field.
            body["format"] = format
        return Key.from_json(self._t.json("POST", "/keys", json_body=body) or {})

    def list(self, account: str | None = None) -> List[Key]:
        """The keys of the caller's account, or with the admin key those of
        ``account`` (every account's when None). Secrets are never shown."""
        d = self._t.json("GET", "/keys", query={"account": account or None}) or {}
        return [Key.from_json(k) for k in d.get("keys") or []]

    def remove(self, id: str) -> None:
        """Remove key ``id`` (its id, not its secret) and the keys made with
        it: they stop working at once."""
        self._t.json("DELETE", _name_path("keys", id, "key id"))


class Accounts:
    """Accounts (``Client.accounts``; the admin key only)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def create(self, name: str, *, concurrency: int | None = None, trial_hours: float | None = None) -> Account:
        """Create the account ``name`` (its id). ``concurrency`` (sandboxes
        at once) and ``trial_hours`` (free sandbox time: a trial account)
        default to the server's (100, not a trial)."""
        if not name:
            raise ValueError("account name is empty")
        body: dict[str, Any] = {"name": name}
        if concurrency:
            body["concurrency"] = int(concurrency)
        if trial_hours:
            body["trial_hours"] = float(trial_hours)
        return Account.from_json(self._t.json("POST", "/accounts", json_body=body) or {})

    def list(self) -> List[Account]:
        """Every account, oldest first."""
        d = self._t.json("GET", "/accounts") or {}
        return [Account.from_json(a) for a in d.get("accounts") or []]


class Client:
    """The account-wide API: ``secrets``, ``keys``, ``accounts``,
    ``usage()`` and ``trial()``.

    ``api_key`` and ``base_url`` work as for :class:`Sandbox`: they default
    to WITHRUNTIME_API_KEY and WITHRUNTIME_BASE_URL (then
    http://127.0.0.1:7878, with the local daemon's admin key when no key is
    set). Safe to use from several threads.
    """

    def __init__(self, *, api_key: str | None = None, base_url: str | None = None) -> None:
        self._t = Transport(base_url, api_key)
        self.secrets = Secrets(self._t)
        """The account's secrets: set, list, remove."""
        self.keys = Keys(self._t)
        """API keys: create, list, remove."""
        self.accounts = Accounts(self._t)
        """Accounts (admin key only): create, list."""

    @property
    def base_url(self) -> str:
        """The server's address."""
        return self._t.base_url

    def usage(
        self,
        *,
        from_: str | date | None = None,
        to: str | date | None = None,
        account: str | None = None,
        key: str | None = None,
    ) -> Usage:
        """Usage per UTC day, account and key, and its total cost.

        ``from_`` and ``to`` are the first and last UTC days included (a
        ``date``, or a str YYYY-MM-DD); ``key`` keeps one key's rows (its
        id); ``account`` is honored for the admin key only (which otherwise
        sees every account). None selects everything the key may see.
        """
        q = {"account": account or None, "key": key or None,
             "from": _day(from_, "from_"), "to": _day(to, "to")}
        return Usage.from_json(self._t.json("GET", "/usage", query=q) or {})

    def trial(self) -> Trial:
        """Ask the server for a trial account and return its full key. Sends
        no API key, whatever this client's. Only servers started with
        ``--allow-trial`` offer trials (otherwise forbidden or not_found),
        rate-limited per client address (rate_limited)."""
        t = Transport(self._t.base_url, "")
        return Trial.from_json(t.json("POST", "/trial") or {})

    def close(self) -> None:
        """Close this thread's idle connections."""
        self._t.close()

    def __repr__(self) -> str:
        return f"<withruntime.Client {self._t.base_url}>"
