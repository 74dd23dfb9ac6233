"""Size quotas with least-recently-used eviction for the harness's caches: the PCH folder
(`kernelbench.harness.build.pch.evict_pchs`) and the build cache (`evict_builds`).

Why: every cache the parent keeps grows with what candidates make (DESIGN.md rule 9: a quota on every
cache); one compile could leave 1.5 GB in the build cache, which had no bound. Covers: the total size of
each cache, least recently used first, never an item in use (`CacheItem.protected`); a build cache entry is
evicted only under its exclusive locks (the compile's and the use lock, `USE_LOCK`) and when no evaluation
has used it for `BUILD_EVICT_GRACE_S` (a cache hit marks the entry used while it holds the use lock shared, so
the check under the exclusive locks sees it).
Not covered: an evaluation that keeps using its entry for longer than the grace period after its compile
stage (its run stage would then find the entry gone: `harness_error`, retried); a cache over its quota
because every entry in it is in use (logged, left until the next eviction).
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kernelbench.harness.build.build_tree import BUILD_BOUNDS, remove_tree

log = logging.getLogger(__name__)

BUILD_CACHE_QUOTA_MB = int(os.environ.get("KERNEL_AGENT_BUILD_CACHE_QUOTA_MB", "20480"))
"""Most megabytes the build cache may hold. An honest entry holds 1-30 MB (a CPU `load_inline` library and its
object, ~1-3 MB; CUDA builds more), so 20 GB keeps a few thousand; one entry holds at most
`BUILD_BOUNDS.max_total_bytes` (a build over it is refused: `build:tree_too_large`)."""
BUILD_EVICT_GRACE_S = 3600.0
"""An entry used within this many seconds is never evicted: an evaluation reads its entry from its compile
stage to its run stage (minutes; `compile_timeout_s` + the run stages' timeouts)."""
USED_STAMP = "used"
"""File in an entry, touched at every use: its mtime orders eviction."""
SIZE_FILE = "bytes"
"""File in an entry: the bytes of its build folder, written by the parent when it brought the folder back."""
EVICTED_PREFIX = ".evicted-"
USE_LOCK = ".use"
"""Suffix of an entry's use lock (`<key>.use` beside `<key>.lock`, the compile's): a cache hit holds it shared
while it marks the entry used, eviction exclusively with the compile lock, so a hit never waits on a compile."""


@dataclass(frozen=True)
class CacheItem:
    """One evictable thing in a cache: a PCH, a build entry."""

    path: Path
    size_bytes: int
    last_use_s: float
    """Epoch seconds of its last use (eviction order: oldest first)."""
    protected: bool
    """Never evicted now (the item just built, one in use)."""


def evict_lru(items: list[CacheItem], quota_bytes: int, remove: Callable[[CacheItem], bool]) -> list[str]:
    """Remove the least recently used unprotected items (`remove`; False when it could not, e.g. in use) until
    the items hold at most `quota_bytes`. Returns the paths removed."""
    total = sum(i.size_bytes for i in items)
    removed = []
    for item in sorted(items, key=lambda i: i.last_use_s):
        if total <= quota_bytes:
            break
        if not item.protected and remove(item):
            total -= item.size_bytes
            removed.append(str(item.path))
    if total > quota_bytes:
        log.warning("cache over its quota (%d MB > %d MB): every other item is in use", total >> 20, quota_bytes >> 20)
    return removed


def mark_used(entry: Path) -> None:
    """Record a use of the build cache entry `entry` (a no-op before its first compile made it)."""
    try:
        (entry / USED_STAMP).touch()
    except FileNotFoundError:
        pass


def record_size(entry: Path, size_bytes: int) -> None:
    (entry / SIZE_FILE).write_text(str(size_bytes))


def _last_use(entry: Path) -> float:
    for p in (entry / USED_STAMP, entry):
        try:
            return p.stat().st_mtime
        except OSError:
            continue
    return 0.0


def _entry_bytes(entry: Path) -> int:
    """The entry's recorded size, or its files' sizes (a bounded walk) when none was recorded."""
    try:
        return int((entry / SIZE_FILE).read_text())
    except (OSError, ValueError):
        pass
    total, left = 0, BUILD_BOUNDS.max_entries * 4
    for root, dirs, files in os.walk(entry):
        for name in files:
            left -= 1
            if left < 0:
                return total
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _evict_entry(root: Path, item: CacheItem, grace_s: float) -> bool:
    """Move the entry aside under its exclusive lock (skipped when any evaluation holds it), then remove it."""
    name = item.path.name
    if not name.startswith(EVICTED_PREFIX):
        try:
            with open(root / f"{name}.lock", "a") as lock, open(root / f"{name}{USE_LOCK}", "a") as use:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False  # compiling, or a cache hit marking its use now
                if time.time() - _last_use(item.path) < grace_s:
                    return False  # used since the list was made
                aside = root / f"{EVICTED_PREFIX}{name}-{secrets.token_hex(4)}"
                os.rename(item.path, aside)
        except OSError as e:  # the cache stays over its quota until the next eviction; the evaluation goes on
            log.error("could not evict the build cache entry %s: %s", item.path, e)
            return False
        item = CacheItem(aside, item.size_bytes, item.last_use_s, False)
    return remove_tree(item.path)


def evict_builds(root: Path, keep: str, quota_mb: int = 0, grace_s: float | None = None) -> list[str]:
    """Evict the least recently used entries of the build cache `root` until it holds at most `quota_mb`
    (BUILD_CACHE_QUOTA_MB by default); never `keep` (the entry just built) nor one used within `grace_s`
    (BUILD_EVICT_GRACE_S). Folders an earlier eviction moved aside but could not remove go first."""
    grace = BUILD_EVICT_GRACE_S if grace_s is None else grace_s
    now = time.time()
    items = []
    for entry in root.iterdir():
        if entry.is_symlink() or not entry.is_dir():
            continue
        last = 0.0 if entry.name.startswith(EVICTED_PREFIX) else _last_use(entry)
        items.append(CacheItem(entry, _entry_bytes(entry), last, entry.name == keep or now - last < grace))
    return evict_lru(items, (quota_mb or BUILD_CACHE_QUOTA_MB) << 20, lambda item: _evict_entry(root, item, grace))
