"""CPU sizes for KernelBench-format problems: the plan keeps linked sizes consistent, a recorded size is what
`--size cpu` loads, a stale record is refused or re-derived, and a real sandboxed derivation of the fixture
problems lands in 1-20 ms or says why not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli.main import main
from kernelbench.tasks import cpu_size_records
from kernelbench.tasks.cpu_size_records import CpuSizeRecord, record_key, source_sha
from kernelbench.tasks.kernelbench_repo import load_kernelbench_repo
from kernelbench.tasks.problem import load_problem
from kernelbench.sizes.size_derivation import derive, to_derive
from kernelbench.tasks.size_plan import constants_at, plan_sizes
from kernelbench.tasks.task import TaskFormatError

FIXTURES = Path(__file__).parent / "fixtures" / "kb_sizes"
ALPHAS = [a / 20 for a in range(21)]


def fixture_tasks(root: Path = FIXTURES) -> dict[str, object]:
    return {t.id: t for t in load_kernelbench_repo(root)}


@pytest.fixture
def records_file(tmp_path, monkeypatch):
    path = tmp_path / "sizes.json"
    monkeypatch.setenv(cpu_size_records.RECORDS_ENV, str(path))
    return path


def test_plan_keeps_heads_dividing_the_embedding_at_every_scale():
    plan = plan_sizes(fixture_tasks()["kb:L1/2_Head_Attention"].source)
    assert {k.label for k in plan.scalable} == {"batch_size", "seq_len", "embed_dim"}
    assert [k.kept_because for k in plan.knobs if k.name == "num_heads"] == ["structural name"]
    for alpha in ALPHAS:
        sizes = {**plan.constants, **constants_at(plan, alpha)}
        assert sizes["num_heads"] == 12 and sizes["embed_dim"] % 12 == 0, (alpha, sizes)
        assert 1 <= sizes["batch_size"] <= 64 and 1 <= sizes["seq_len"] <= 1024
    small, large = constants_at(plan, 0.3), constants_at(plan, 0.8)
    assert small["embed_dim"] < large["embed_dim"] < 768


def test_plan_keeps_groups_kernel_and_recomputes_derived_shapes():
    plan = plan_sizes(fixture_tasks()["kb:L2/1_Conv_GroupNorm"].source)
    assert {k.label for k in plan.scalable} == {"batch_size", "in_channels", "out_channels", "height", "width"}
    for alpha in ALPHAS:
        sizes = {**plan.constants, **constants_at(plan, alpha)}
        assert sizes["kernel_size"] == 3 and sizes["num_groups"] == 12
        assert sizes["out_channels"] % 12 == 0
        assert sizes["bias_shape"] == (sizes["out_channels"], 1, 1)  # recomputed from the new channel count
        assert sizes["height"] == sizes["width"]  # equal sizes stay equal


def test_plan_of_a_problem_with_literal_sizes_has_nothing_to_scale():
    plan = plan_sizes(fixture_tasks()["kb:L1/3_Literal_Matmul"].source)
    assert plan.scalable == () and constants_at(plan, 0.2) == {}


def test_plan_keeps_sizes_an_unevaluated_expression_reads():
    source = "import torch\nn = 4096\nshape = torch.Size([n, n])\nm = 2048\n"
    plan = plan_sizes(source)
    assert {k.label: k.kept_because for k in plan.knobs} == {"n": "used by an expression not evaluated here", "m": ""}
    assert constants_at(plan, 0.5) == {"m": 48}  # 2048 ** 0.5 = 45.3, in steps of 8


def _record(task, overrides, **kw) -> CpuSizeRecord:
    return CpuSizeRecord(task_id=record_key(task), source_sha256=kw.pop("sha", source_sha(task.source)),
                         status=kw.pop("status", "sized"), overrides=overrides, cpu_ms=kw.pop("cpu_ms", 5.0), **kw)


def test_recorded_size_is_what_size_cpu_loads(records_file, capsys):
    task = fixture_tasks()["kb:L2/1_Conv_GroupNorm"]
    sizes = {"batch_size": 2, "in_channels": 8, "out_channels": 24, "height": 10, "width": 10, "bias_shape": [24, 1, 1]}
    cpu_size_records.update_records({record_key(task): _record(task, sizes)})
    problem = load_problem(task, "cpu")
    assert problem.module.bias_shape == (24, 1, 1)  # a JSON list back to the file's tuple
    assert [tuple(x.shape) for x in problem.get_inputs()] == [(2, 8, 10, 10)]
    model = problem.Model(*problem.get_init_inputs())
    assert tuple(model(*problem.get_inputs()).shape) == (2, 24, 8, 8)
    assert load_problem(task, "gpu").module.batch_size == 128
    assert main(["tasks", "show", task.id, "--source", f"kernelbench:{FIXTURES}", "--size", "cpu"]) == 0
    assert "tensor float32 (2, 8, 10, 10)" in capsys.readouterr().out


def test_stale_record_is_refused_and_rederived(records_file, tmp_path):
    root = tmp_path / "kb"
    shutil.copytree(FIXTURES, root)
    task = fixture_tasks(root)["kb:L1/1_Wide_ReLU"]
    cpu_size_records.update_records({record_key(task): _record(task, {"batch_size": 64, "dim": 4096})})
    assert load_problem(task, "cpu").module.dim == 4096
    path = Path(task.path)
    path.write_text(path.read_text().replace("dim = 262144", "dim = 131072"))
    changed = fixture_tasks(root)["kb:L1/1_Wide_ReLU"]
    with pytest.raises(TaskFormatError, match=r"derived for another version of this problem .*re-derive it: "
                                              r"python3 scripts/kernelbench_cpu_sizes.py PATH --only L1/1_Wide_ReLU"):
        load_problem(changed, "cpu")
    todo, messages = to_derive(list(fixture_tasks(root).values()), cpu_size_records.load_records())
    assert changed in todo and len(todo) == 4  # the three never derived, and the changed one
    assert messages == [f"kb:L1/1_Wide_ReLU: the problem changed since its size was derived (hash "
                        f"{source_sha(task.source)}, now {source_sha(changed.source)}): deriving again"]
    assert to_derive([task], cpu_size_records.load_records()) == ([], [])


def test_unscalable_record_refuses_cpu_size_with_its_reason(records_file):
    task = fixture_tasks()["kb:L1/3_Literal_Matmul"]
    cpu_size_records.update_records({record_key(task): _record(task, None, status="unscalable",
                                                               reason="no module-level size constant to scale")})
    with pytest.raises(TaskFormatError, match="no CPU size for kb:L1/3_Literal_Matmul: no module-level size constant"):
        load_problem(task, "cpu")
    assert load_problem(task, "gpu").module.get_inputs  # the gpu size is untouched


def test_tasks_list_size_cpu_says_which_have_a_size(records_file, capsys):
    tasks = fixture_tasks()
    relu, literal = tasks["kb:L1/1_Wide_ReLU"], tasks["kb:L1/3_Literal_Matmul"]
    cpu_size_records.update_records({
        record_key(relu): _record(relu, {"batch_size": 64, "dim": 4096}, cpu_ms=4.2),
        record_key(literal): _record(literal, None, status="unscalable", reason="sizes are literals")})
    assert main(["tasks", "list", "--source", f"kernelbench:{FIXTURES}", "--size", "cpu", "--json"]) == 0
    by_id = {r["id"]: r["cpu_size"] for r in json.loads(capsys.readouterr().out)}
    assert by_id["kb:L1/1_Wide_ReLU"] == {"has_size": True, "in_range": True, "text": "4.2 ms: batch_size=64, dim=4096"}
    assert by_id["kb:L1/3_Literal_Matmul"] == {"has_size": False, "in_range": False, "text": "no: sizes are literals"}
    assert by_id["kb:L1/2_Head_Attention"] == {"has_size": False, "in_range": None, "text": "no: not derived"}
    assert main(["tasks", "list", "--source", f"kernelbench:{FIXTURES}", "--size", "cpu"]) == 0
    assert "1/4 tasks have a CPU size (1 recorded in 1-20 ms on one thread); 2 not derived or stale" in capsys.readouterr().out


def test_builtin_tasks_report_their_own_cpu_size(capsys):
    assert main(["tasks", "list", "--size", "cpu", "--level", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["cpu_size"]["text"] == "its own CPU_SIZE" for r in rows)


def test_sandboxed_derivation_of_the_fixtures(tmp_path):
    """One real server run: sizes from meta estimates and real one-thread timings, never the GPU size."""
    tasks = fixture_tasks()
    got = derive(list(tasks.values()))
    assert set(got) == set(tasks)
    for key in ("kb:L1/1_Wide_ReLU", "kb:L1/2_Head_Attention", "kb:L2/1_Conv_GroupNorm"):
        r = got[key]
        assert r.status == "sized" and 1.0 <= r.cpu_ms <= 20.0 and r.overrides, (key, r)
        assert r.source_sha256 == source_sha(tasks[key].source)
    attention = got["kb:L1/2_Head_Attention"].overrides
    assert attention.get("embed_dim", 768) % 12 == 0
    conv = got["kb:L2/1_Conv_GroupNorm"].overrides
    assert conv["out_channels"] % 12 == 0 and list(conv["bias_shape"]) == [conv["out_channels"], 1, 1]
    literal = got["kb:L1/3_Literal_Matmul"]
    assert literal.status == "unscalable" and literal.overrides is None
    assert literal.reason.startswith("no module-level size constant to scale; estimated")


def test_a_problem_file_given_by_path_gets_the_record_of_its_text(records_file, tmp_path):
    from cli.eval_cmd import resolve_task

    task = fixture_tasks()["kb:L1/1_Wide_ReLU"]
    cpu_size_records.update_records({record_key(task): _record(task, {"batch_size": 32, "dim": 2048})})
    copy = tmp_path / "relu.py"
    copy.write_text(task.source)
    assert load_problem(resolve_task(str(copy)), "cpu").module.dim == 2048
    copy.write_text(task.source + "\n# edited\n")
    assert load_problem(resolve_task(str(copy)), "cpu").module.dim == 262144  # another text: its own sizes


def test_literal_sizes_are_named():
    from kernelbench.tasks.size_plan import literal_sizes

    assert literal_sizes(fixture_tasks()["kb:L1/3_Literal_Matmul"].source) == [8192, 8192, 8192, 8192]
    assert literal_sizes(fixture_tasks()["kb:L1/1_Wide_ReLU"].source) == []
