"""Configuration sections as dataclasses whose fields carry their own help, bounds and choices
(``option``, as TRL's ``GRPOConfig`` carries them in ``field(metadata=...)``), and the one reader of
such sections: a mapping applied key by key (``apply``: an unknown key names the closest valid one,
a wrong type names the key and the type expected) and checked (``check``: choices, bounds, finite
floats), each error one line that names the file, the key and what was expected.

The run's configuration (``run/config.py``) and the agent section every path shares
(``agents/config.py``) are written with it; ``agentboost config`` and ``docs/configuration.md``
are generated from the fields alone (``run/config_reference.py``)."""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from typing import Any, Callable, Iterator

from .errors import InputError

# (low, high, low inclusive, high inclusive); None is open
Bounds = tuple[float | None, float | None, bool, bool]
AT_LEAST_1: Bounds = (1, None, True, False)
AT_LEAST_0: Bounds = (0, None, True, False)
POSITIVE: Bounds = (0, None, False, False)
MAX_NEW_TOKENS = 1_000_000  # more tokens than any model's context holds (1e9 was accepted)
TOKENS: Bounds = (1, MAX_NEW_TOKENS, True, True)  # tokens a call or an episode may sample


class ConfigError(InputError):
    pass


def option(default: Any = dataclasses.MISSING, *, help: str, bounds: Bounds | None = None,
           choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None,
           default_factory: Callable[[], Any] | Any = dataclasses.MISSING) -> Any:
    """A field with its help text, bounds and choices. ``choices`` may be a function (the names a
    registry holds, read when the configuration is checked or the reference is written)."""
    metadata = {"help": help, "bounds": bounds, "choices": choices}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def help_of(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")


def bounds_of(f: dataclasses.Field) -> Bounds | None:
    return f.metadata.get("bounds")


def choices_of(f: dataclasses.Field) -> tuple[str, ...] | None:
    choices = f.metadata.get("choices")
    return tuple(choices()) if callable(choices) else choices


def title_of(cls: type) -> str:
    """A section's one-line description: the first line of its docstring."""
    return (cls.__doc__ or "").strip().splitlines()[0].rstrip(".") if cls.__doc__ else ""


def default_of(cls: type, name: str) -> Any:
    """The default of ``cls``'s field ``name``: the one value every path that leaves it out gets."""
    f = cls.__dataclass_fields__[name]
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def describe_bounds(bounds: Bounds) -> str:
    lo, hi, lo_in, hi_in = bounds
    parts = []
    if lo is not None:
        parts.append(f"{'>=' if lo_in else '>'} {lo:g}")
    if hi is not None:
        parts.append(f"{'<=' if hi_in else '<'} {hi:g}")
    return " and ".join(parts)


def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def is_section(hint: Any) -> bool:
    return dataclasses.is_dataclass(hint) and isinstance(hint, type)


def keys(cls: type, prefix: str = "") -> list[str]:
    """Every dotted key of ``cls`` and its nested sections."""
    out = []
    for f in dataclasses.fields(cls):
        hint = hints(cls)[f.name]
        out += keys(hint, f"{prefix}{f.name}.") if is_section(hint) else [prefix + f.name]
    return out


def coerce(value: Any, hint: Any, key: str, where: str) -> Any:
    """``value`` as type ``hint``, or a ``ConfigError`` naming ``key`` and the type expected."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or str(origin) == "types.UnionType":
        if value is None and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
        origin = typing.get_origin(hint)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: {key} must be a list, got {value!r}")
        item = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        return [coerce(v, item, key, where) for v in value]
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: {key} must be an integer, got {value!r}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 3e-5 (no dot) as text
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{where}: {key} must be a number, got {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{where}: {key} must be text, got {value!r}")
    if origin is dict:
        if isinstance(value, dict):
            return value
        raise ConfigError(f"{where}: {key} must be a mapping, got {value!r}")
    return value


def unknown_key(key: str, known: list[str], where: str) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"{where}: unknown configuration key {key!r}{hint}")


def apply(obj: Any, data: Any, where: str, prefix: str = "", known: list[str] | None = None) -> None:
    """Set ``obj``'s fields (nested sections too) from the mapping ``data``, type by type. A
    mapping-valued field is merged key by key (``key.sub=value`` overrides one entry)."""
    known = known if known is not None else keys(type(obj), prefix)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {prefix.rstrip('.') or 'the configuration'} must be a mapping")
    types = hints(type(obj))
    fields = {f.name for f in dataclasses.fields(obj)}
    for key, value in data.items():
        full = prefix + str(key)
        if key not in fields:
            raise unknown_key(full, known, where)
        hint = types[key]
        if is_section(hint):
            apply(getattr(obj, key), value, where, full + ".", known)
        elif typing.get_origin(hint) is dict:
            setattr(obj, key, {**getattr(obj, key), **coerce(value, hint, full, where)})
        else:
            setattr(obj, key, coerce(value, hint, full, where))


def walk(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any, dataclasses.Field]]:
    """(dotted key, value, field) of every leaf field of ``obj``."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if is_section(type(value)):
            yield from walk(value, f"{prefix}{f.name}.")
        else:
            yield prefix + f.name, value, f


def check(obj: Any, where: str, prefix: str = "") -> None:
    """Every field within its choices and bounds, every float finite; the first that is not is one
    line naming the key, its value and what was expected."""
    for key, value, f in walk(obj, prefix):
        choices = choices_of(f)
        if choices is not None and value not in choices:
            close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{where}: {key} must be one of {', '.join(choices)}; got {value!r}{hint}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: {key} must be a finite number, got {value}")
        b = bounds_of(f)
        if b is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{where}: {key} must be a number, got {value!r}")
        if b is not None:
            lo, hi, lo_in, hi_in = b
            if (lo is not None and (value < lo or (value == lo and not lo_in))) or \
                    (hi is not None and (value > hi or (value == hi and not hi_in))):
                raise ConfigError(f"{where}: {key} must be {describe_bounds(b)}, got {value:g}")
