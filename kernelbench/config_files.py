"""The one config mechanism of every command (train, sft, pipeline, bench, optimize) and of the settings they
nest (`EvalConfig`, `ExecutorConfig`, `SamplingConfig`, `PromptSettings`, `ScoreConfig`, `LayoutConfig`):
each is a frozen pydantic v2 dataclass (docs/architecture.md, "Configuration"), and this module is how one is
read from a preset, laid under flags, dumped to `config.json` and read back. Nothing here is hand-written
parsing: pydantic validates, in strict mode, and its errors become one `ConfigError` line naming the source
and each key's dotted path."""

from __future__ import annotations

import functools
import json
import os
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

C = TypeVar("C")


class ConfigError(ValueError):
    """A preset, a flag or a config.json that does not validate; the message names the source and the path of
    each key at fault (`configs/x.yaml: train.sampling.temprature: unknown setting`)."""


@functools.cache
def _adapter(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


def describe(error: ValidationError, source: str, prefix: str = "", renamed: dict[str, str] | None = None) -> str:
    """pydantic's errors as one line: each key's dotted path and what is wrong with its value; a name of before
    (`renamed`: old dotted path -> new one, e.g. `train.max_new_tokens` -> `sampling.max_tokens`) names its new place."""
    parts = []
    for e in error.errors():
        key = ".".join([prefix] * bool(prefix) + [str(p) for p in e["loc"]])
        new = (renamed or {}).get(key)
        if e["type"] in ("unexpected_keyword_argument", "extra_forbidden") and new:
            old = key.rpartition(".")[2]
            section, name = new.split(".")
            what = f"`{old}` is now `{new}` (nested: `{section}: {{{name}: ...}}`)"
        elif e["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
            what = "unknown setting"
        elif e["type"] == "value_error":
            what = str(e["ctx"]["error"])
        else:
            shown = e["input"] if not isinstance(e["input"], dict) else "a section"
            what = f"{e['msg']} (got {shown!r})"
        parts.append(f"{key}: {what}" if key else what)
    return f"{source}: " + "; ".join(parts)


def validate(cls: type[C], data: Any, source: str, prefix: str = "", renamed: dict[str, str] | None = None) -> C:
    """`data` (a preset, flags gathered into a dict, a config.json's `config`) as `cls`, validated in pydantic's
    strict mode on its JSON form (YAML and flags give JSON types): unknown keys, mistyped values and modes
    outside their `Literal` raise `ConfigError` naming `source` and each key's path under `prefix` (`describe`)."""
    try:
        return _adapter(cls).validate_json(json.dumps(data, default=str), strict=True)
    except ValidationError as e:
        raise ConfigError(describe(e, source, prefix, renamed)) from None


def to_dict(config: Any) -> dict[str, Any]:
    """Every field (nested settings as nested dicts, tuples as lists): pydantic's JSON dump, what `validate` reads back."""
    return _adapter(type(config)).dump_python(config, mode="json")


def updated(config: C, changes: dict[str, Any], source: str = "command line", prefix: str = "",
            renamed: dict[str, str] | None = None) -> C:
    """`config` with `changes` applied, validated again as a whole (`validate`: a bad value names its key). A
    change to a section is a dict of its fields (`{"executor": {"kind": "ray"}}`) laid over the section's
    values, so a section keeps the values its command gives it by default (train samples 16k tokens where
    `SamplingConfig` says 4k); None is no change (a flag that was not given)."""
    values = to_dict(config)
    _refuse_derived(values, changes, source, prefix)
    return validate(type(config), _laid_over(values, changes), source, prefix, renamed)


DERIVED = {"prompt": "device", "eval": "device"}
"""Sections whose field takes its command's value of the same name (one place to set it: the configs'
validators copy it down). Setting it in the section to something else is an error, not a value overwritten."""


def _refuse_derived(values: Any, changes: Any, source: str, prefix: str) -> None:
    if not isinstance(changes, dict) or not isinstance(values, dict):
        return
    for key, change in changes.items():
        path = f"{prefix}.{key}" if prefix else key
        name = DERIVED.get(key)
        if name and isinstance(change, dict) and change.get(name) is not None and name in values:
            top = changes.get(name) if changes.get(name) is not None else values[name]
            if change[name] != top:
                raise ConfigError(f"{source}: {path}.{name} is set from `{prefix + '.' if prefix else ''}{name}` "
                                  f"({top!r}), got {change[name]!r}: set `{name}` instead")
        _refuse_derived(values.get(key), change, source, path)


def _laid_over(values: Any, changes: Any) -> Any:
    if not isinstance(values, dict) or not isinstance(changes, dict):
        return values if changes is None else changes
    return {**values, **{k: _laid_over(values.get(k), v) for k, v in changes.items() if v is not None}}


def save_config(config: Any, out_dir: str, name: str = "config.json", **extra: Any) -> str:
    """Write the resolved config (every field: `to_dict`) beside the run's outputs, with `extra` top-level
    entries (e.g. the world size a run actually got); returns the path. `load_saved` reads it back."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"command": type(config).__name__, "config": to_dict(config), **extra}, f, indent=2, sort_keys=True)
    return path


def load_saved(path: str, kinds: tuple[type, ...]) -> Any:
    """The config a `save_config` file holds, validated as its command's config (one of `kinds`)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    by_name = {c.__name__: c for c in kinds}
    if doc.get("command") not in by_name:
        raise ConfigError(f"{path}: `command` must be one of {', '.join(by_name)}, got {doc.get('command')!r}")
    return validate(by_name[doc["command"]], doc["config"], path, "config")
