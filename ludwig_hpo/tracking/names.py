"""How a name as written (a feature's name, a parameter path such as ``size (cm).encoder.type``,
a score key such as ``validation/a/b/loss``) is spelled where a library restricts names, and
back. Two reversible encodings, each the identity on the names those libraries accept as they
are, so a store or an experiment written before reads the same:

- **MLflow keys** (params, metrics, tags). MLflow accepts alphanumerics (Unicode letters and
  digits too), ``_ - . space / :`` in a key, refuses a key that would resolve to another path
  (``a//b``, ``/a``, ``a/``, a ``.`` or ``..`` segment, a leading ``..``) and keys longer than
  :data:`MAX_KEY_LENGTH`. :func:`mlflow_key` writes every other character as ``:`` and its code
  point in hex (``:28`` for ``(``, ``:u2603`` above ``0xff``, ``:U0001f600`` above ``0xffff``),
  the ``:`` itself too, and the ``/`` or ``.`` that would form such a path the same way;
  :func:`name_of_key` reads it back. The parameter ``"."`` (config blocks merged at the root)
  is :data:`ROOT_PARAM_KEY`.
- **Ray Tune config keys**. Tune reads a ``/`` in a config key as nesting (it unflattens
  ``a/b`` into ``{"a": {"b": ...}}``); :func:`tune_key` writes ``/`` as ``%2F`` and ``%`` as
  ``%25``, :func:`path_of_tune_key` reads them back.

Users see the names as written: the console, ``results.json``, ``search_space.json`` and the
report decode what they read. Pure, standard library only: any process and layer may import it.
"""

from __future__ import annotations

import re
from typing import Final

#: MLflow's longest param, metric and tag key (``mlflow.utils.validation.MAX_ENTITY_KEY_LENGTH``).
MAX_KEY_LENGTH: Final = 250
#: The escape character of :func:`mlflow_key` (a character MLflow accepts, rare in names).
ESCAPE: Final = ":"
#: The sweep parameter ``"."`` (partial config blocks merged at the root); MLflow refuses ``.``.
ROOT_PATH: Final = "."
ROOT_PARAM_KEY: Final = "root_block"

# MLflow's rule (mlflow.utils.validation.validate_param_and_metric_name, Unicode ``\w``) less
# the escape character and ``/``, which are decided apart.
_KEPT = re.compile(r"[\w.\- ]")
_ESCAPED = re.compile(r":(?:u([0-9a-f]{4})|U([0-9a-f]{8})|([0-9a-f]{2}))")


def _escape(c: str) -> str:
    code = ord(c)
    if code <= 0xFF:
        return f"{ESCAPE}{code:02x}"
    if code <= 0xFFFF:
        return f"{ESCAPE}u{code:04x}"
    return f"{ESCAPE}U{code:08x}"


def _segment(raw: str, first: bool) -> str:
    enc = "".join(c if c != "/" and _KEPT.match(c) else _escape(c) for c in raw)
    if raw in (".", "..") or (first and raw.startswith("..")):
        return _escape(".") + enc[1:]  # a path segment MLflow would resolve
    return enc


def mlflow_key(name: str) -> str:
    """The MLflow key of ``name`` (see the module docstring): ``name`` itself when MLflow
    accepts it as it is and it holds no ``:``. Pure; the result may still exceed
    :data:`MAX_KEY_LENGTH` (see :func:`key_too_long`).

    >>> mlflow_key("size (cm).encoder.type")
    'size :28cm:29.encoder.type'
    >>> mlflow_key("validation/a/b/loss")
    'validation/a/b/loss'
    """
    if name == ROOT_PATH:
        return ROOT_PARAM_KEY
    segments: list[str] = []
    start, n = 0, len(name)
    for i, c in enumerate(name):
        # a '/' separates two path segments only between two other characters
        if c == "/" and 0 < i < n - 1 and name[i + 1] != "/" and i > start:
            segments.append(_segment(name[start:i], first=not segments))
            start = i + 1
    segments.append(_segment(name[start:], first=not segments))
    return "/".join(segments)


def name_of_key(key: str) -> str:
    """The name as written of an MLflow key :func:`mlflow_key` wrote (inverse of it); a key
    with no escapes (any key written before them) reads as itself. Pure."""
    if key == ROOT_PARAM_KEY:
        return ROOT_PATH
    if ESCAPE not in key:
        return key
    return _ESCAPED.sub(lambda m: chr(int(m.group(1) or m.group(2) or m.group(3), 16)), key)


def key_too_long(name: str) -> bool:
    """Whether MLflow refuses ``name``'s key for its length (over :data:`MAX_KEY_LENGTH`)."""
    return len(mlflow_key(name)) > MAX_KEY_LENGTH


def tune_key(path: str) -> str:
    """The Ray Tune config key of a parameter path: no ``/`` (``a/b.x`` -> ``a%2Fb.x``),
    the path itself when it holds neither ``/`` nor ``%``. Pure."""
    if "/" not in path and "%" not in path:
        return path
    return path.replace("%", "%25").replace("/", "%2F")


def path_of_tune_key(key: str) -> str:
    """The parameter path of a Tune config key :func:`tune_key` wrote (inverse of it). Pure."""
    if "%" not in key:
        return key
    return re.sub(r"%(2F|25)", lambda m: "/" if m.group(1) == "2F" else "%", key)
