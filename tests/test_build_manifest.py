"""The run child loads only the build the parent recorded (kernelbench/harness/child/build_manifest.py), in-process:
no compiler, no child. The end-to-end attack is tests/adversarial/build_in_init.py (tests/test_adversarial.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch.utils.cpp_extension as cpp_extension

from kernelbench.harness.build import symbols
from kernelbench.harness.child import build_manifest


def _build(ext: Path, name: str = "k") -> Path:
    folder = ext / name
    folder.mkdir(parents=True)
    (folder / "main.cpp").write_text("torch::Tensor f(torch::Tensor x) { return x; }\n")
    (folder / "build.ninja").write_text("cflags = -O3\n")
    (folder / f"{name}.so").write_bytes(b"\x7fELF" + bytes(12) + b"\x03\x00" + bytes(40))
    (folder / "lock").write_text("")  # torch's baton and ninja's logs say nothing about the build
    (folder / ".ninja_log").write_text("# ninja log v5\n")
    return folder


def test_a_recorded_build_matches_and_any_change_does_not(tmp_path):
    ext = tmp_path / "ext"
    folder = _build(ext)
    manifest = build_manifest.record(str(ext))
    assert set(manifest) == {"k"} and set(manifest["k"]) == {"main.cpp", "build.ninja", "k.so"}
    assert build_manifest.mismatch(manifest, str(ext), str(folder)) == ""
    (folder / ".ninja_log").write_text("rebuilt\n")
    assert build_manifest.mismatch(manifest, str(ext), str(folder)) == ""
    (folder / "main.cpp").write_text("namespace fast = at::cpu;\n")  # other sources
    assert "main.cpp" in build_manifest.mismatch(manifest, str(ext), str(folder))
    (folder / "main.cpp").write_text("torch::Tensor f(torch::Tensor x) { return x; }\n")
    (folder / "payload.so").write_bytes(b"\x7fELF")  # a library written in place
    assert "payload.so" in build_manifest.mismatch(manifest, str(ext), str(folder))
    assert "nothing was built" in build_manifest.mismatch(manifest, str(ext), str(ext / "late"))
    assert "outside" in build_manifest.mismatch(manifest, str(ext), str(tmp_path / "elsewhere"))


def test_the_run_child_hooks_never_build_and_refuse_unrecorded_loads(tmp_path, monkeypatch):
    ext = tmp_path / "ext"
    folder = _build(ext)
    manifest = build_manifest.record(str(ext))
    monkeypatch.setattr(cpp_extension, "_run_ninja_build", cpp_extension._run_ninja_build)
    monkeypatch.setattr(cpp_extension, "_import_module_from_library", cpp_extension._import_module_from_library)
    monkeypatch.setattr(build_manifest, "REFUSED", [])
    build_manifest.refuse_builds(manifest, str(ext))
    cpp_extension._run_ninja_build(str(folder), False, "")  # up to date: nothing runs, nothing raised
    assert build_manifest.REFUSED == []
    late = ext / "late"
    late.mkdir()
    with pytest.raises(build_manifest.BuildRefused, match="builds nothing"):
        cpp_extension._run_ninja_build(str(late), False, "")
    (folder / "k.so").write_bytes(b"\x7fELF another library")
    with pytest.raises(build_manifest.BuildRefused):
        cpp_extension._import_module_from_library("k", str(folder), True)
    assert len(build_manifest.REFUSED) == 2
    judged = build_manifest.judge(tuple(build_manifest.REFUSED))
    assert set(judged) == {build_manifest.FLAG} and "late" in judged[build_manifest.FLAG]
    assert build_manifest.judge(()) == {}


def test_every_shared_object_in_the_build_is_judged_whatever_its_name(tmp_path):
    folder = _build(tmp_path / "ext")
    (folder / "payload.bin").write_bytes(b"\x7fELF\x02\x01" + bytes(10) + b"\x03\x00" + bytes(40))
    (folder / "main.o").write_bytes(b"\x7fELF\x02\x01" + bytes(10) + b"\x01\x00" + bytes(40))  # relocatable
    found = {Path(p).name for p in symbols.libraries(str(tmp_path / "ext"))}
    assert found == {"k.so", "payload.bin"}
