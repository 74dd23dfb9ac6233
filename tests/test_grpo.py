"""GRPO on TRL's GRPOTrainer with the multi-turn rollout: learning, advantages, batch shapes, presets."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace

import pytest

from grpo_synthetic import LowIdRollout, build_tiny_dir
from agent.policy import SamplingConfig
from rewards import advantages_by_task
from train import grpo, trl_args
from kernelbench.config_files import to_dict, validate
from train.config import TrainConfig
from train.presets import load_config
from train.metrics_log import read_metrics


def _config(model_dir: str, out: str, **kw) -> TrainConfig:
    base = TrainConfig(model=model_dir, tasks="L1/01_relu,L1/03_silu", steps=12, tasks_per_batch=2, trajectories=8,
                       turns=2, sampling=SamplingConfig(temperature=1.0, max_tokens=12), learning_rate=2e-2,
                       grad_clip=1.0, warmup_ratio=0.0, tensorboard=False, out=out, checkpoint_every=100,
                       micro_batch_size=16, torch_threads=1)
    return replace(base, **kw)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> str:
    return build_tiny_dir(str(tmp_path_factory.mktemp("tiny") / "model"))


def _vocab(path: str) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(path))


def test_reward_rises_through_grpo_trainer(tiny_dir, tmp_path):
    cfg = _config(tiny_dir, str(tmp_path / "run"))
    grpo.main(cfg, rollout=LowIdRollout(_vocab(tiny_dir), 8, 2, 12), say=lambda s: None)
    records = read_metrics(cfg.out)
    assert [r["step"] for r in records] == list(range(12))  # one row per step (2 optimizer steps each)
    first = sum(r["reward/mean_score"] for r in records[:3]) / 3
    last = sum(r["reward/mean_score"] for r in records[-3:]) / 3
    assert last > first + 0.1, (first, last)
    assert all(r["loss/grad_norm"] > 0 for r in records)
    for key in ("loss/entropy", "rollout/advantage_std", "rollout/zero_variance_group_share", "perf/eval_wait_share",
                "rollout/logprob_gap_mean", "reward/turn2_mean_score"):
        assert key in records[0], key
    # the trainer's recomputed log-probs match generation's (on-policy, transformers generation)
    assert all(r["rollout/logprob_gap_mean"] < 1e-4 for r in records)
    saved = json.load(open(os.path.join(cfg.out, "config.json")))
    assert saved["config"]["steps"] == 12 and saved["world_size"] == 1
    assert os.path.isdir(os.path.join(cfg.out, "checkpoints", "checkpoint-24"))  # saved at the end
    assert os.path.isfile(os.path.join(cfg.out, "final", "config.json"))


def test_trainer_advantages_equal_our_group_normalised_returns(tiny_dir, tmp_path):
    """Multi-turn batch, a task drawn twice, a harness_error turn in the middle of a trajectory (score None): the
    step runs, and TRL's advantages are rewards/'s."""
    cfg = _config(tiny_dir, str(tmp_path / "run"), steps=1, tasks="L1/03_silu", tasks_per_batch=2, turns=3,
                  trajectories=4, micro_batch_size=4, gamma=0.4, eval_every=1, eval_limit=2)
    seen: dict = {"loss_inputs": []}

    def watch_the_loss(trainer) -> None:
        """Keeps what TRL hands its loss (the public `compute_loss`): the advantages it computed, each beside
        its sample's tokens, since TRL shuffles the samples before it splits them into micro-batches."""
        seen["trainer"], compute_loss = trainer, trainer.compute_loss

        def spy(model, inputs, *args, **kwargs):
            seen["loss_inputs"].append({k: inputs[k].detach().cpu() for k in
                                        ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages")})
            return compute_loss(model, inputs, *args, **kwargs)

        trainer.compute_loss = spy

    grpo.main(cfg, rollout=LowIdRollout(_vocab(tiny_dir), 4, 3, 8, harness_error_at=(1, 1)), say=lambda s: None,
              trainer_hook=watch_the_loss)
    trainer = seen["trainer"]
    [row] = read_metrics(cfg.out)
    assert 0.3 <= row["eval/best_score_mean"] <= 1.3 and row["eval/correct_share"] == 1.0  # held-out eval ran
    # the trainer and the rollout never share one fast tokenizer ("Already borrowed" across threads)
    assert trainer.rollout_func.tokenizer is not trainer.processing_class
    assert trainer.rollout_func.tokenizer._tokenizer is not trainer.processing_class._tokenizer
    groups = trainer.rollout_func.last_samples
    assert len(groups) == 2 and all(len(g) == 12 for g in groups)  # silu twice: two groups of 4 × 3
    assert [s.completion_ids for s in groups[0]] != [s.completion_ids for s in groups[1]]  # own seeds
    trl_adv: dict[tuple, list[float]] = {}
    for b in seen["loss_inputs"]:
        for i, adv in enumerate(b["advantages"].tolist()):
            key = (tuple(b["prompt_ids"][i][b["prompt_mask"][i].bool()].tolist()),
                   tuple(b["completion_ids"][i][b["completion_mask"][i].bool()].tolist()))
            trl_adv.setdefault(key, []).append(adv)
    flat = [s for g in groups for s in g]
    assert sum(len(v) for v in trl_adv.values()) == len(flat)
    unknown = [s for s in flat if s.reward is None]
    assert len(unknown) == 2 and all(s.status == "harness_error" for s in unknown)
    known = [(s.group, s.reward) for s in flat if s.reward is not None]
    ours = iter(advantages_by_task(known, eps=1e-4))
    expected: dict[tuple, list[float]] = {}
    for s in flat:  # a harness_error turn: excluded from its group (advantage 0), not scored 0
        expected.setdefault((tuple(s.prompt_ids), tuple(s.completion_ids)), []).append(
            0.0 if s.reward is None else next(ours))
    assert trl_adv.keys() == expected.keys()
    for key, advs in expected.items():
        assert sorted(trl_adv[key]) == pytest.approx(sorted(advs), abs=1e-5)
    # the rewards are the discounted returns of the run's scores (0.3 + low-id share)
    by_traj = {}
    for s in groups[0]:
        by_traj.setdefault(s.traj_id, []).append(s)
    for turns in by_traj.values():
        if all(t.reward is not None for t in turns):
            r = [t.score for t in turns]
            assert turns[0].reward == pytest.approx(r[0] + 0.4 * r[1] + 0.16 * r[2])


def test_batch_shape_keeps_groups_whole_on_each_rank():
    cfg = TrainConfig(tasks_per_batch=8, trajectories=16, turns=4, grad_steps_per_batch=2, micro_batch_size=1)
    shape = trl_args.batch_shape(cfg, 8)
    assert (shape.tasks_per_rank, shape.samples_per_rank, shape.grad_accumulation, shape.steps_per_generation) == \
        (1, 64, 32, 64)
    assert shape.per_device_batch * shape.steps_per_generation % cfg.samples_per_task == 0
    with pytest.raises(ValueError, match="multiple of the number of processes"):
        trl_args.batch_shape(cfg, 3)
    with pytest.raises(ValueError, match="micro"):
        trl_args.batch_shape(replace(cfg, micro_batch_size=5), 8)


def test_unknown_rollout_logprobs_reach_trl_as_nan(tiny_dir):
    """A turn whose policy gave no log-probs, and a filler slot, carry NaN per token: TRL's importance-sampling
    correction reads NaN as "no correction" (ratio 1), where a 0.0 (probability 1) would shrink the ratio, and
    that token's gradient, towards 0."""
    from transformers import AutoTokenizer

    from train.multiturn_rollout import MultiTurnRollout
    from train.samples import TurnSample

    def sample(turn: int, logprobs: tuple[float, ...]) -> TurnSample:
        return TurnSample(group=0, task_id="t", traj_id="0", turn_index=turn, prompt=(), prompt_ids=(1, 2),
                          completion_ids=(5, 6, 7), logprobs=logprobs, score=0.3, reward=0.3, advantage=0.0,
                          status="correct")

    rollout = MultiTurnRollout(TrainConfig(), rollout=None, tasks=[], tokenizer=AutoTokenizer.from_pretrained(tiny_dir))
    out = rollout.to_trl([[sample(0, (-0.5, -0.25, -1.0)), sample(1, ())]], g=3)
    known, unknown, filler = out["logprobs"]
    assert known == [-0.5, -0.25, -1.0]
    assert len(unknown) == 3 and all(math.isnan(x) for x in unknown)
    assert len(filler) == 1 and math.isnan(filler[0]) and out["env_mask"][2] == [0]


def test_step_callback_adds_the_projects_metrics_to_trls_logs(tmp_path):
    """The rollout's metrics reach the row through the public callback path: `on_log` extends the `logs` TRL's
    `Trainer.log` passed (in place, so later callbacks see them), averages repeated values, empties the
    buffer on every process, and leaves the closing summary alone."""
    from transformers import TrainerControl, TrainerState

    from train.metrics_log import PendingMetrics
    from train.trainer import make_callbacks

    metrics = PendingMetrics()
    cfg = TrainConfig(tensorboard=False, grad_steps_per_batch=1)
    [callback] = make_callbacks(cfg, str(tmp_path), None, metrics, say=lambda s: None)
    state, control = TrainerState(), TrainerControl()
    state.is_world_process_zero, state.global_step = True, 1
    callback.on_train_begin(None, state, control)
    metrics.record("perf/eval_wait_share", 0.25)
    metrics.record("perf/eval_wait_share", 0.75)
    metrics.record("rollout/logprob_gap_mean", 1e-7)
    logs = {"loss": 0.5}
    callback.on_log(None, state, control, logs=logs)
    assert logs == {"loss": 0.5, "perf/eval_wait_share": 0.5, "rollout/logprob_gap_mean": 1e-7}
    [row] = read_metrics(str(tmp_path))
    assert row["perf/eval_wait_share"] == 0.5 and row["loss/policy"] == 0.5 and row["step"] == 0
    assert metrics.take() == {}
    metrics.record("reward/mean_score", 1.0)
    summary = {"train_runtime": 3.0}
    callback.on_log(None, state, control, logs=summary)
    assert summary == {"train_runtime": 3.0}
    other = make_callbacks(cfg, str(tmp_path / "rank1"), None, metrics, say=lambda s: None)[0]
    state.is_world_process_zero = False
    other.on_train_begin(None, state, control)
    other.on_log(None, state, control, logs={"loss": 0.1})  # a process that writes no rows still empties its buffer
    assert metrics.take() == {}
    with pytest.raises(ValueError, match="non-finite"):
        metrics.record("rollout/advantage_std", math.nan)


def test_rollout_knows_each_rows_task_from_its_prompt(tiny_dir):
    """TRL hands `rollout_func` the prompts alone: the dataset's prompt names the task, and a prompt of no
    task of the run is an error, not a guess."""
    from transformers import AutoTokenizer

    from kernelbench.tasks.catalog import find_task
    from train.multiturn_rollout import MultiTurnRollout, task_prompt

    tasks = [find_task("L1/01_relu", "builtin"), find_task("L1/03_silu", "builtin")]
    rollout = MultiTurnRollout(TrainConfig(), rollout=None, tasks=tasks, tokenizer=AutoTokenizer.from_pretrained(tiny_dir))
    rows = grpo.task_dataset(tasks, 4)
    assert [rollout.task_of(r["prompt"]).id for r in rows] == ["L1/01_relu", "L1/03_silu"] * 2
    with pytest.raises(RuntimeError, match="names no task"):
        rollout.task_of(task_prompt("L1/99_unknown"))


@pytest.mark.parametrize("preset,world", [("cpu-tiny", 1), ("cpu-tiny", 2), ("qwen3-8b-8gpu", 4),
                                          ("qwq-32b-multinode", 8)])
def test_presets_resolve_to_grpo_settings(preset, world, monkeypatch):
    """Every preset's train section maps onto TRL's GRPOConfig at its launch's world size (its layout's
    training processes; no GPU needed). Server mode takes the server's address from the launch: a preset
    names no host, and without one the run stops before anything loads."""
    cfg = load_config(TrainConfig, preset, "train")
    shape = trl_args.batch_shape(cfg, world)
    if cfg.backend == "vllm" and cfg.vllm_mode == "server":
        monkeypatch.delenv(trl_args.SERVER_HOST_ENV, raising=False)
        with pytest.raises(ValueError, match="needs the server's address"):
            trl_args.grpo_kwargs(cfg, shape, "/tmp/x")
        monkeypatch.setenv(trl_args.SERVER_HOST_ENV, "10.0.0.7")
        assert trl_args.grpo_kwargs(cfg, shape, "/tmp/x")["vllm_server_host"] == "10.0.0.7"
    kw = trl_args.grpo_kwargs(cfg, shape, "/tmp/x")
    assert kw["num_generations"] == cfg.trajectories * cfg.turns
    assert kw["per_device_train_batch_size"] * kw["steps_per_generation"] == shape.samples_per_rank
    assert kw["max_steps"] == cfg.steps * cfg.grad_steps_per_batch
    assert (kw["loss_type"], kw["epsilon"], kw["epsilon_high"], kw["beta"]) == \
        (cfg.loss_norm, cfg.eps_low, cfg.eps_high, cfg.kl_coef)
    if cfg.backend == "vllm":
        assert kw["use_vllm"] and kw["vllm_mode"] in ("colocate", "server")
    if preset == "cpu-tiny":
        from trl import GRPOConfig

        args = GRPOConfig(**{**kw, "ddp_backend": None})
        assert args.use_cpu and not args.bf16 and args.epsilon_high == cfg.eps_high


def test_presets_nest_the_shared_settings_and_old_flat_names_fail(tmp_path):
    """The settings train, bench and optimize share are one section each; a flat name of before names its
    new place; a nested `device` is the config's own; flags set nested fields. (tests/test_config.py: the
    loader's errors in general.)"""
    cfg = load_config(TrainConfig, "cpu-tiny", "train")
    assert (cfg.sampling.max_tokens, cfg.prompt.style, cfg.eval.timing_trials, cfg.executor.compile_workers) == \
        (512, "compact", 12, 1)
    assert cfg.eval.device == cfg.prompt.device == cfg.device == "cpu"
    assert validate(TrainConfig, to_dict(cfg), "config.json") == cfg  # config.json reads back as the same config
    old = tmp_path / "old.yaml"
    old.write_text("train:\n  max_new_tokens: 64\n  eval_timing_trials: 5\n")
    with pytest.raises(ValueError, match=r"train.max_new_tokens: `max_new_tokens` is now `sampling.max_tokens`.*"
                                         r"train.eval_timing_trials: `eval_timing_trials` is now `eval.timing_trials`"):
        load_config(TrainConfig, str(old), "train")
    old.write_text("train:\n  device: cpu\n  eval:\n    device: cuda\n")
    with pytest.raises(ValueError, match=r"train.eval.device is set from `train.device` \('cpu'\), got 'cuda'"):
        load_config(TrainConfig, str(old), "train")
    old.write_text("train:\n  executor: ray\n")
    with pytest.raises(ValueError, match=r"train.executor: Input should be an object \(got 'ray'\)"):
        load_config(TrainConfig, str(old), "train")
    old.write_text("train:\n  eval:\n    timing_trial: 5\n")
    with pytest.raises(ValueError, match=r"old.yaml: train.eval.timing_trial: unknown setting"):
        load_config(TrainConfig, str(old), "train")
    flags = load_config(TrainConfig, "cpu-tiny", "train", {"executor": {"kind": "ray", "max_in_flight": 4},
                                                           "prompt": {"language": None}})
    assert (flags.executor.kind, flags.executor.max_in_flight, flags.executor.run_workers) == ("ray", 4, 1)
    assert flags.prompt == cfg.prompt  # a flag not given (None) leaves the preset's value


def test_preset_headers_name_their_launch_commands():
    from train.presets import CONFIGS_DIR

    from train.layout import resolve

    for name in ("qwen3-8b-8gpu", "qwq-32b-multinode"):
        head = (CONFIGS_DIR / f"{name}.yaml").read_text().splitlines()[0]
        assert "accelerate launch --config_file configs/accelerate/" in head and head.startswith("# "), head
        acc = head.split("--config_file ")[1].split()[0]
        assert os.path.isfile(os.path.join(CONFIGS_DIR.parent, acc)), acc
        # the launch starts as many processes as the layout trains on (the rest of the node times candidates)
        layout = resolve(load_config(TrainConfig, name, "train"))
        assert f"--num_processes {layout.training_processes} " in head, head


class _ScriptedEvaluator:
    """An evaluator stand-in for `ReusingEvaluator`'s tests: the n-th submission of a text gets `verdicts[text][n]`."""

    def __init__(self, verdicts: dict):
        self.verdicts, self.calls = verdicts, []

    def submit(self, task, src, group=""):
        from concurrent.futures import Future

        self.calls.append(src)
        f = Future()
        f.set_result(self.verdicts[src][self.calls.count(src) - 1])
        return f


def test_reusing_evaluator_evaluates_each_distinct_text_once():
    from concurrent.futures import Future

    from kernelbench.tasks.task import Task
    from train.rollout import ReusingEvaluator

    class Counting:
        def __init__(self):
            self.calls = []

        def submit(self, task, src, group=""):
            self.calls.append((task.id, src))
            f = Future()
            f.set_result(len(self.calls))
            return f

    inner = Counting()
    ev = ReusingEvaluator(inner)
    a = Task(id="L1/a", level=1, name="a", origin="builtin", source="x")
    b = Task(id="L1/b", level=1, name="b", origin="builtin", source="x")
    futures = [ev.submit(t, s) for t, s in ((a, "k1"), (a, "k1"), (a, "k2"), (b, "k1"), (a, "k2"))]
    assert len(set(map(id, futures))) == 5  # distinct Futures: the episode runner keys its slots by them
    got = [f.result() for f in futures]
    assert got == [1, 1, 2, 3, 2] and inner.calls == [("L1/a", "k1"), ("L1/a", "k2"), ("L1/b", "k1")]
    assert (ev.submitted, ev.reused) == (5, 2)


def test_reusing_evaluator_measures_again_after_a_rejection_on_timing_noise():
    """An identical text whose verdict was `rejected` on timing-noise flags alone is measured again (and its new
    verdict shared from then on); a rejection with any other flag is reused as any verdict is."""
    from kernelbench.harness.result import EvalResult
    from kernelbench.tasks.task import Task
    from train.rollout import ReusingEvaluator

    verdicts = {"noisy": [EvalResult(status="rejected", flags=("timing_inconsistent",)), EvalResult(status="correct")],
                # timed twice by the harness (`evaluate.RETIMED`), rejected by the second timing: still noise alone
                "retimed": [EvalResult(status="rejected", flags=("timing_inconsistent", "retimed")),
                            EvalResult(status="correct")],
                "cheat": [EvalResult(status="rejected", flags=("timing_inconsistent", "dynamic:torch_compute_op")),
                          EvalResult(status="correct")]}

    inner = _ScriptedEvaluator(verdicts)
    ev = ReusingEvaluator(inner)
    t = Task(id="L1/a", level=1, name="a", origin="builtin", source="x")
    got = [ev.submit(t, s).result().status for s in ("noisy", "noisy", "noisy", "retimed", "retimed", "cheat", "cheat")]
    assert got == ["rejected", "correct", "correct", "rejected", "correct", "rejected", "rejected"]
    assert inner.calls == ["noisy", "noisy", "retimed", "retimed", "cheat"] and (ev.reused, ev.remeasured) == (2, 2)


def test_reusing_evaluator_with_retries_measures_a_noisy_rejection_again_before_any_sample_gets_it():
    """`noisy_retries`: a rejection on timing noise alone is measured again at once, so no sample of the text
    (the first included) is scored by it; a second noisy rejection past the retries stands."""
    from kernelbench.harness.result import EvalResult
    from kernelbench.tasks.task import Task
    from train.rollout import ReusingEvaluator

    noisy = EvalResult(status="rejected", flags=("timing_inconsistent",))
    verdicts = {"once": [noisy, EvalResult(status="correct")], "twice": [noisy, noisy, EvalResult(status="correct")]}

    inner = _ScriptedEvaluator(verdicts)
    ev = ReusingEvaluator(inner, noisy_retries=1)
    t = Task(id="L1/a", level=1, name="a", origin="builtin", source="x")
    assert [ev.submit(t, "once").result().status for _ in range(3)] == ["correct"] * 3
    assert ev.submit(t, "twice").result().status == "rejected"
    assert inner.calls == ["once", "once", "twice", "twice"] and ev.remeasured == 2


@pytest.mark.slow
def test_two_step_run_with_the_real_harness(tmp_path, build_cache_dir):
    """Two steps of the cpu-tiny recipe through the real harness and a freshly built tiny policy."""
    d = build_tiny_dir(str(tmp_path / "model"))
    base = load_config(TrainConfig, "cpu-tiny", "train")
    cfg = replace(base, model=d, steps=2, out=str(tmp_path / "run"), sampling=replace(base.sampling, max_tokens=24),
                  eval=replace(base.eval, build_cache_dir=build_cache_dir), tensorboard=True)
    grpo.main(cfg, say=lambda s: None)
    records = read_metrics(cfg.out)
    assert [r["step"] for r in records] == [0, 1]
    assert all(math.isclose(sum(v for k, v in r.items() if k.startswith("rollout/status_")), 1.0) for r in records)
    for key in ("perf/eval_wait_share", "perf/rollout_s", "reward/mean_score", "rollout/advantage_std", "loss/policy"):
        assert all(key in r for r in records), key  # the rollout's metrics reach every row beside TRL's
    assert os.listdir(os.path.join(cfg.out, "tb"))


@pytest.mark.slow
def test_two_cpu_processes_write_one_record_per_step_and_resume(tmp_path):
    """`torchrun --nproc_per_node 2 ... train --steps 2`, then `--steps 3 --resume`: world size 2 recorded,
    one writer (2 rows, then 3), a checkpoint, and the resumed run trains step 2 only."""
    import subprocess
    import sys

    model = build_tiny_dir(str(tmp_path / "model"))
    out = str(tmp_path / "run")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "cli.main", "train",
           "--preset", "cpu-tiny", "--model", model, "--out", out]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(cmd + ["--steps", "2"], cwd=root, check=True, timeout=1200, capture_output=True)
    assert json.load(open(os.path.join(out, "config.json")))["world_size"] == 2
    assert [r["step"] for r in read_metrics(out)] == [0, 1]
    assert os.path.isdir(os.path.join(out, "checkpoints", "checkpoint-4"))
    done = subprocess.run(cmd + ["--steps", "3", "--resume"], cwd=root, check=True, timeout=1200,
                          capture_output=True, text=True)
    assert "resuming from" in done.stdout + done.stderr
    assert [r["step"] for r in read_metrics(out)] == [0, 1, 2]
    assert os.path.isdir(os.path.join(out, "checkpoints", "checkpoint-6"))
