"""The GPU layout of a training run (train/layout.py), its plan (train/plan.py, `kernel-agent train --plan`) and
the machine-wide lease of a timing GPU (kernelbench/executors/gpu_lease.py). No GPU needed: layouts are
resolved for described nodes."""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import replace

import pytest

from cli.main import main as cli_main
from kernelbench.executors import gpu_lease
from train.config import TrainConfig
from train.presets import load_config
from train.grpo import with_layout
from train.layout import LayoutError, check_launch, evaluation_gpus, resolve, visible_id


def preset(name: str, **layout) -> TrainConfig:
    config = load_config(TrainConfig, name, "train")
    return replace(config, layout=replace(config.layout, **layout)) if layout else config


def test_the_8b_node_trains_on_four_gpus_and_times_on_the_other_four():
    config = preset("qwen3-8b-8gpu")
    lay = resolve(config, 8)
    assert lay.train == (0, 1, 2, 3) and lay.generate == lay.train and lay.evaluate == (4, 5, 6, 7)
    assert not set(lay.evaluate) & (set(lay.train) | set(lay.generate)) and not lay.shared_timing
    assert lay.training_processes == 4
    # the evaluator of every training process: one run worker per timing GPU, each run pinned to its GPU
    pinned = with_layout(config, lay)
    assert pinned.executor.gpus == ("4", "5", "6", "7") and pinned.executor.run_workers == 4
    assert pinned.eval.shared_gpu is False


def test_the_32b_training_node_times_nowhere_on_itself():
    config = preset("qwq-32b-multinode")
    lay = resolve(config, 8)
    assert lay.train == tuple(range(8)) and lay.evaluate == () and lay.sharding == "zero3"
    assert with_layout(config, lay) == config  # timing is the Ray pool's, on other GPUs
    local_ray = replace(config, executor=replace(config.executor, ray_address=""))
    with pytest.raises(LayoutError, match="executor.ray_address"):
        resolve(local_ray, 8)


def test_layouts_that_cannot_run_name_the_setting():
    config = preset("qwen3-8b-8gpu")
    with pytest.raises(LayoutError, match="no GPU left to train.*layout.eval_gpus 4"):
        resolve(config, 4)
    with pytest.raises(LayoutError, match="layout.eval_gpus is 0 with a local executor"):
        resolve(preset("qwen3-8b-8gpu", eval_gpus=0), 8)
    with pytest.raises(LayoutError, match=r"tasks_per_batch \(8\) must be a multiple.*3 GPUs"):
        resolve(preset("qwen3-8b-8gpu", eval_gpus=5), 8)
    with pytest.raises(LayoutError, match="vllm_server_gpus is 2 but generation is not a vLLM server"):
        resolve(preset("qwen3-8b-8gpu", vllm_server_gpus=2), 8)
    with pytest.raises(ValueError, match="sharding"):  # a Literal: refused when the config is built
        preset("qwen3-8b-8gpu", sharding="zero2")
    cpu = load_config(TrainConfig, "cpu-tiny", "train")
    assert resolve(cpu, 0).train == () and with_layout(cpu, resolve(cpu, 0)) == cpu  # CPU runs: no GPU roles


def test_one_gpu_check_shares_the_gpu_only_when_told_and_flags_it():
    one = replace(preset("qwen3-8b-8gpu", eval_gpus=1), tasks_per_batch=1)
    with pytest.raises(LayoutError, match="no GPU left to train"):
        resolve(one, 1)
    shared = replace(one, layout=replace(one.layout, share_timing_gpu=True))
    lay = resolve(shared, 1)
    assert lay.train == (0,) and lay.evaluate == (0,) and lay.shared_timing
    assert with_layout(shared, lay).eval.shared_gpu is True
    assert "time candidates (shared: one-GPU check)" in dict(lay.rows())[0]


def test_server_mode_on_the_node_keeps_its_gpus_apart():
    config = replace(preset("qwen3-8b-8gpu", eval_gpus=2, vllm_server_gpus=2), vllm_mode="server",
                     vllm_tensor_parallel_size=2)
    lay = resolve(config, 8)
    assert lay.train == (0, 1, 2, 3) and lay.vllm_server == (4, 5) and lay.generate == (4, 5) and lay.evaluate == (6, 7)
    with pytest.raises(LayoutError, match="vllm_tensor_parallel_size 4 needs that many server GPUs"):
        resolve(replace(config, vllm_tensor_parallel_size=4), 8)


def test_a_launch_that_does_not_match_the_layout_is_refused():
    lay = resolve(preset("qwen3-8b-8gpu"), 8)
    check_launch(lay, 4, "")
    with pytest.raises(LayoutError, match="--num_processes 4"):
        check_launch(lay, 8, "")  # accelerate's ddp config starts 8 unless told: half would train on timing GPUs
    with pytest.raises(LayoutError, match="sharding is 'none' but accelerate runs DEEPSPEED"):
        check_launch(lay, 4, "DEEPSPEED")
    zero3 = resolve(preset("qwq-32b-multinode"), 8)
    with pytest.raises(LayoutError, match="sharding is 'zero3' but accelerate runs FSDP"):
        check_launch(zero3, 8, "FSDP")


def test_gpu_ids_follow_the_launchers_view(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_id(5) == "5"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b,3,7")
    assert visible_id(1) == "GPU-b" and visible_id(3) == "7"
    lay = resolve(preset("qwen3-8b-8gpu", eval_gpus=2, gpus_per_node=4), 0)
    assert lay.train == (0, 1) and evaluation_gpus(lay) == ("3", "7")
    with pytest.raises(LayoutError, match="not in this process's CUDA_VISIBLE_DEVICES"):
        visible_id(4)


def test_the_run_child_sees_only_its_gpu(tmp_path):
    from kernelbench.harness import children, reference
    from kernelbench.tasks.inputs import Seeds
    from kernelbench.harness.config import EvalConfig
    from kernelbench.tasks.catalog import find_task

    task = find_task("L1/26_matrix_scalar_multiply")
    seeds = Seeds(init_seed=1, input_seeds=(2,), extra_seeds=(), timing_seeds=(3,))
    for device, gpu, want in (("cuda", "6", "6"), ("cuda", "", None), ("cpu", "6", None)):
        config = EvalConfig(device=device, cuda_device=gpu)
        spec = children.child_spec(config, str(tmp_path), reference.reference_job(task, config, seeds))
        assert dict(spec.env).get("CUDA_VISIBLE_DEVICES") == want, (device, gpu)


def _hold(gpu: str, path: str) -> None:
    with gpu_lease.held(gpu):
        start = time.monotonic()
        time.sleep(0.3)
        with open(path, "a") as f:
            f.write(f"{start} {time.monotonic()}\n")


def test_one_timing_run_per_gpu_across_processes(tmp_path, monkeypatch):
    """Every training process has its own evaluator: the lease on a GPU holds across processes."""
    monkeypatch.setattr(gpu_lease, "LOCK_DIR", str(tmp_path / "locks"))
    ctx = multiprocessing.get_context("fork")
    same = str(tmp_path / "same")
    procs = [ctx.Process(target=_hold, args=("4", same)) for _ in range(3)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join(20)
    spans = sorted(tuple(map(float, line.split())) for line in open(same))
    assert len(spans) == 3 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # never two at once
    other = [ctx.Process(target=_hold, args=(g, str(tmp_path / g))) for g in ("5", "6")]
    t1 = time.monotonic()
    for p in other:
        p.start()
    for p in other:
        p.join(20)
    assert time.monotonic() - t1 < time.monotonic() - t0  # distinct GPUs run side by side
    pool = gpu_lease.GpuPool(("4", "5"))
    with pool.lease() as a, pool.lease() as b:
        assert {a, b} == {"4", "5"}
    with pytest.raises(ValueError, match="not a GPU id"):
        gpu_lease.lock_path("../etc")


def test_an_evaluator_with_gpus_needs_cuda_and_a_worker_each():
    from kernelbench.executors.evaluator import Evaluator
    from kernelbench.harness.config import EvalConfig

    with pytest.raises(ValueError, match="need device cuda"):
        Evaluator(EvalConfig(device="cpu"), run_workers=1, gpus=("0",))
    with pytest.raises(ValueError, match="one run worker each"):
        Evaluator(EvalConfig(device="cuda"), run_workers=1, gpus=("0", "1"))


def test_plan_prints_the_layout_and_memory_and_refuses_what_cannot_run(capsys):
    assert cli_main(["train", "--config", "configs/qwen3-8b-8gpu.yaml", "--plan", "--gpus", "8"]) == 0
    out = capsys.readouterr().out
    for i in range(4):
        assert f"GPU {i}: train + vLLM (colocated)" in out and f"GPU {i + 4}: time candidates" in out
    assert "memory per training GPU (Qwen/Qwen3-8B" in out and "LoRA r64" in out and "512 evaluations" in out
    assert "plan: fits" in out
    assert cli_main(["train", "--config", "configs/qwq-32b-multinode.yaml", "--plan", "--gpus", "8"]) == 0
    out = capsys.readouterr().out
    assert "sharding zero3" in out and "time candidates" not in out and "fp32 master weights" in out
    assert cli_main(["train", "--config", "configs/qwen3-8b-8gpu.yaml", "--plan", "--gpus", "4"]) == 2
    assert "layout.eval_gpus" in capsys.readouterr().err


def test_plan_memory_grows_past_the_gpu_and_says_which_setting(tmp_path):
    from train.plan import memory, plan, shape_of

    config = preset("qwq-32b-multinode", sharding="none")  # 32B full fine-tuning on one GPU's memory each
    problems = plan(config, 8, say=lambda _: None)
    assert problems and "layout.sharding" in problems[0] and "GiB per training GPU" in problems[0]
    lay = resolve(config, 8)
    sharded = memory(preset("qwq-32b-multinode"), resolve(preset("qwq-32b-multinode"), 8), shape_of("Qwen/QwQ-32B"), 141)
    assert memory(config, lay, shape_of("Qwen/QwQ-32B"), 141).update_gib > 5 * sharded.update_gib / 2
    # a local model folder is read from its config.json (no download)
    (tmp_path / "config.json").write_text('{"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 100, '
                                          '"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128}')
    s = shape_of(str(tmp_path))
    assert s.layers == 2 and s.head_dim == 16 and s.params == 2 * (64 * 16 * 8 + 64 * 64 + 3 * 64 * 128) + 2 * 100 * 64
    with pytest.raises(ValueError, match="no shape known"):
        shape_of("someone/unknown-model")


def test_every_accelerate_config_loads_and_builds_its_plugin():
    """What `accelerate launch --config_file` reads: each file parses as accelerate's own config, its sharding
    plugin is built from its values, a DeepSpeed config's package is in the gpu extra (launching without it
    raised ImportError), and each preset's header launches the config its layout's sharding names."""
    import tomllib

    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin

    from train.presets import CONFIGS_DIR

    extras = tomllib.loads((CONFIGS_DIR.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    kinds = {}
    for path in sorted((CONFIGS_DIR / "accelerate").glob("*.yaml")):
        cfg = ClusterConfig.from_yaml_file(str(path))
        kind = str(cfg.distributed_type).split(".")[-1]
        kinds[path.name] = kind
        if kind == "DEEPSPEED":
            ds = cfg.deepspeed_config
            plugin = DeepSpeedPlugin(zero_stage=ds["zero_stage"], zero3_init_flag=ds["zero3_init_flag"],
                                     zero3_save_16bit_model=ds["zero3_save_16bit_model"])
            assert plugin.zero_stage == 3 and ds["zero3_save_16bit_model"]  # final/ gathers 16-bit weights
            assert any(d.startswith("deepspeed==") for d in extras["gpu"])
        elif kind == "FSDP":
            fs = cfg.fsdp_config
            plugin = FullyShardedDataParallelPlugin(fsdp_version=fs["fsdp_version"], state_dict_type=fs["fsdp_state_dict_type"])
            assert plugin.fsdp_version == 2 and "FULL_STATE_DICT" in str(plugin.state_dict_type)
    assert kinds == {"ddp.yaml": "MULTI_GPU", "deepspeed-zero3.yaml": "DEEPSPEED", "fsdp2.yaml": "FSDP"}
    want = {"none": "MULTI_GPU", "zero3": "DEEPSPEED", "fsdp": "FSDP"}
    for name in ("qwen3-8b-8gpu", "qwq-32b-multinode"):
        head = (CONFIGS_DIR / f"{name}.yaml").read_text().splitlines()[0]
        launched = head.split("--config_file configs/accelerate/")[1].split()[0]
        assert kinds[launched] == want[preset(name).layout.sharding], (name, launched)
