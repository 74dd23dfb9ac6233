"""The run child's report channel: every kept output and the final report travel over a pipe the parent owns.

Why: a file the child writes into its scratch folder stays writable by candidate code until the sandbox is
gone (an `atexit` handler or a C++ static destructor of the candidate's extension ran after the old
`result.json` / `outputs.pt` were written and rewrote them: an empty op list, patched check outputs). Here
the child writes each output into the pipe as soon as it is produced, before any further candidate call, and
the final report last, then leaves through `os._exit` (no `atexit`, no static destructors). Bytes in a pipe
cannot be taken back by the writer; the parent drains the pipe in a thread, kills the whole sandbox, and only
then parses what came. The candidate shares the child's process, so it could still write bytes of its own into
the pipe: every frame carries a sequence number and a label the parent expects exactly once, and anything out
of order, repeated, unexpected or after the final report makes the report void (`Frames.problem`).

Frame: `MAGIC`, u32 sequence number, u16 label length, u64 payload length, label (ASCII), payload. A call's
payload is a JSON header and the raw bytes of its tensors (`kernelbench.harness.child.call_frames`: plain tensors in
lists, read strictly); the report is JSON.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import stat
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

from kernelbench.harness.child import call_frames

MAGIC = b"KAR1"
HEADER = struct.Struct(">4sIHQ")
RESULT_LABEL = "result"
PROFILE_LABEL = "profile"
"""The one frame a run child may send after its final report: the profile of an untimed call
(`kernelbench.harness.insight.profiling`)."""
LABEL_PATTERN = re.compile(r"^(forward|check|verify)/\d{1,6}$|^result$")
"""The labels a run child may send: one frame per correctness call, check call and verification call, one report.
A compile child sends the report alone (`Frames.report_only_problem`)."""
MAX_LABEL = 32
PIPE_SETSIZE = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class Reporter:
    """Child side. The write function and the pipe's identity are captured at construction, before any
    candidate code runs; `send` refuses (raises) once the descriptor no longer names that pipe."""

    def __init__(self, fd: int):
        self.fd = fd
        self._write, self._fstat, self._dumps = os.write, os.fstat, json.dumps
        self._encode = call_frames.encode
        st = os.fstat(fd)
        if not stat.S_ISFIFO(st.st_mode):
            raise RuntimeError("the report descriptor is not a pipe")
        self._identity = (st.st_dev, st.st_ino)
        self._seq = 0
        self._written = 0
        """Bytes this reporter wrote into the pipe: where the next frame starts in the stream the parent reads."""

    def send_bytes(self, label: str, payload: bytes) -> None:
        self.send_parts(label, [payload])

    def send_parts(self, label: str, parts: list[Any]) -> None:
        """One frame whose payload is `parts` (buffers) written in order, without joining them."""
        st = self._fstat(self.fd)
        if (st.st_dev, st.st_ino) != self._identity:
            raise RuntimeError("the report pipe was replaced")
        name = label.encode("ascii")
        views = [memoryview(p).cast("B") for p in parts]
        head = HEADER.pack(MAGIC, self._seq, len(name), sum(v.nbytes for v in views)) + name
        self._seq += 1
        self._written += len(head) + sum(v.nbytes for v in views)
        for view in [memoryview(head), *views]:
            while view:
                view = view[self._write(self.fd, view):]

    def send_tensors(self, label: str, value: Any) -> None:
        """A call record (`outputs.call_record`) as a `call_frames` payload: each tensor's memory written as it is."""
        start = self._written + HEADER.size + len(label.encode("ascii"))
        self.send_parts(label, self._encode(value, start))

    def send_result(self, result: dict[str, Any]) -> None:
        self.send_bytes(RESULT_LABEL, self._dumps(result, default=str).encode())


@dataclass
class Frames:
    """What the parent read: payloads by label, in arrival order, and the first protocol problem ("" if none)."""

    payloads: dict[str, bytes | memoryview] = field(default_factory=dict)
    """Views into the one buffer the pipe was read into (`Collector.finish`): no copy per frame."""
    problem: str = ""
    truncated: bool = False
    """The pipe ended inside a frame (the child died mid-write, or the cap was reached)."""
    trailer: bytes | None = None
    """The payload of the one frame allowed after the report (`parse(trailer=...)`), None when none came."""

    def result(self) -> dict[str, Any]:
        """The final report, or {} when there is none or it is malformed."""
        raw = self.payloads.get(RESULT_LABEL)
        if raw is None:
            return {}
        try:
            value = json.loads(bytes(raw))
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def tensors(self, label: str) -> Any:
        """The call record of one tensor frame (`call_frames.decode`; raises when absent or unreadable)."""
        return call_frames.decode(self.payloads[label])

    def report_only_problem(self) -> str:
        """The first protocol problem of a pipe that carries the final report alone (the compile child's)."""
        extra = [label for label in self.payloads if label != RESULT_LABEL]
        return self.problem or (f"an unexpected frame {extra[0]!r}" if extra else "")


def parse(data: bytes | bytearray, trailer: str = "") -> Frames:
    """Split the pipe's bytes into frames, checking order, labels and that nothing follows the report but,
    when `trailer` names a label, one frame of that label (`_parse_trailer`). Payloads are views into `data`."""
    frames = Frames()
    data = memoryview(data)
    pos, seq = 0, 0
    while pos < len(data):
        if frames.problem:
            break
        if RESULT_LABEL in frames.payloads:
            if trailer:
                _parse_trailer(frames, data[pos:], seq, trailer)
            else:
                frames.problem = "bytes after the final report"
            break
        if len(data) - pos < HEADER.size:
            frames.truncated = True
            break
        magic, n, label_len, size = HEADER.unpack_from(data, pos)
        if magic != MAGIC or n != seq or label_len > MAX_LABEL:
            frames.problem = f"frame {seq}: bad header"
            break
        start = pos + HEADER.size
        if len(data) - start < label_len + size:
            frames.truncated = True
            break
        label = bytes(data[start:start + label_len]).decode("ascii", "replace")
        if not LABEL_PATTERN.match(label) or label in frames.payloads:
            frames.problem = f"frame {seq}: unexpected or repeated label {label[:MAX_LABEL]!r}"
            break
        frames.payloads[label] = data[start + label_len:start + label_len + size]
        pos, seq = start + label_len + size, seq + 1
    return frames


def _parse_trailer(frames: Frames, data: memoryview, seq: int, label: str) -> None:
    """After the report: exactly one whole frame, numbered `seq`, labelled `label`, and nothing after it; anything
    else voids the report as bytes after it always did. Why not only the trailer: the candidate shares the
    process and can find the job's nonce in memory, so "a report, then anything" would let it forge a whole
    report at import and have the harness's real frames pass as what follows it (with a cut-short frame or an
    overflow of the pipe's cap hiding them). The harness's own frame is small and written in one call."""
    ok = len(data) >= HEADER.size
    if ok:
        magic, n, label_len, size = HEADER.unpack_from(data, 0)
        start = HEADER.size
        ok = magic == MAGIC and n == seq and label_len == len(label) and \
            data[start:start + label_len] == label.encode() and len(data) == start + label_len + size
    if ok:  # and a JSON object, as the harness writes it: a forged frame long enough to swallow the harness's
        try:  # own frames (tensor bytes) would not be one
            ok = isinstance(json.loads(bytes(data[start + label_len:])), dict)
        except ValueError:
            ok = False
    if ok:
        frames.trailer = bytes(data[start + label_len:])
    else:
        frames.problem = "bytes after the final report other than one profile frame"


class Collector:
    """Parent side: a thread drains the read end while the child runs (a pipe holds 64 KiB to 1 MiB; outputs
    are larger), keeping at most `max_bytes` (0: a sink that keeps nothing, for the reference's stand-in
    reports). `finish` is called after the sandbox is killed."""

    def __init__(self, max_bytes: int):
        self.read_fd, self.write_fd = os.pipe()
        try:  # 1 MiB instead of 64 KiB: fewer round trips (each a wake-up of both sides) per output
            fcntl.fcntl(self.write_fd, PIPE_SETSIZE, 1 << 20)
        except OSError:
            pass
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        """Why one growing buffer: a list of chunks joined at the end held the report twice, and its frames
        sliced out as bytes a third time; four run workers evaluating an 8 MB ReLU with 50 check calls each
        held ~10 GB at once (`scripts/false_rejections.py --jobs 4`, its `parent_rss_mib` column)."""
        self.overflow = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def job_fields(self) -> dict[str, int]:
        return {"report_fd": self.write_fd}

    def started(self) -> None:
        """The child holds its copy of the write end: close the parent's (EOF once the sandbox is gone)."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def _drain(self) -> None:
        while True:
            ready = select.select([self.read_fd], [], [], 0.05)[0]
            if not ready:
                if self._stop.is_set():
                    return
                continue
            try:
                chunk = os.read(self.read_fd, 1 << 20)
            except OSError:
                return
            if not chunk:
                return
            if len(self._buffer) + len(chunk) > self.max_bytes:
                self.overflow = True  # keep reading (the child must not block) but keep nothing more
                continue
            self._buffer += chunk

    def finish(self, grace_s: float = 2.0, trailer: str = "") -> Frames:
        """Call only once every process of the sandbox is dead: what was in the pipe, parsed (`parse`). A writer
        that escaped the kill (it keeps the pipe open) gets `grace_s`, then the reading stops."""
        self.started()
        self._thread.join(grace_s)
        self._stop.set()
        self._thread.join()
        os.close(self.read_fd)
        self.read_fd = -1
        data, self._buffer = self._buffer, bytearray()
        frames = parse(data, trailer)
        if self.overflow and not frames.problem:
            frames.problem = f"the report exceeded {self.max_bytes >> 20} MiB"
        return frames

    def close(self) -> None:
        """Idempotent cleanup for error paths."""
        self.started()
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(1.0)
        if self.read_fd >= 0:
            try:
                os.close(self.read_fd)
            except OSError:
                pass
            self.read_fd = -1

