"""The GRPO token loss: clipping, normalisation, importance weights and KL, against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from train.loss import LossConfig, LossInputs, Normaliser, grpo_loss, importance_weights


def _inputs(lp, old, adv, mask=None, rollout=None, ref=None):
    lp = torch.tensor(lp, dtype=torch.float, requires_grad=True)
    old = torch.tensor(old, dtype=torch.float)
    mask = torch.ones_like(old) if mask is None else torch.tensor(mask, dtype=torch.float)
    rollout = torch.full_like(old, float("nan")) if rollout is None else torch.tensor(rollout, dtype=torch.float)
    ref = None if ref is None else torch.tensor(ref, dtype=torch.float)
    return LossInputs(logprobs=lp, old_logprobs=old, rollout_logprobs=rollout,
                      advantages=torch.tensor(adv, dtype=torch.float), mask=mask, ref_logprobs=ref)


def test_on_policy_loss_is_minus_advantage_weighted_tokens_over_constant():
    inp = _inputs([[-1.0, -2.0, 0.0]], [[-1.0, -2.0, 0.0]], [2.0], mask=[[1, 1, 0]])
    loss, st = grpo_loss(inp, LossConfig(loss_norm="dr_grpo", max_completion_tokens=10), Normaliser(1, 2))
    assert float(loss.detach()) == pytest.approx(-2.0 * 2 / 10)  # ratio 1 on 2 real tokens, / (1 sequence × 10)
    loss.backward()
    # d loss / d lp = -A * ratio / const on real tokens, 0 on padding
    assert inp.logprobs.grad.tolist()[0] == pytest.approx([-0.2, -0.2, 0.0])
    assert st.tokens == 2 and st.clipped_low == 0 and st.clipped_high == 0


def test_clip_stops_gradient_beyond_eps_high_for_positive_advantage():
    old = [[0.0, 0.0]]
    lp = [[math.log(1.5), math.log(1.1)]]  # ratio 1.5 (above 1.28) and 1.1 (inside)
    inp = _inputs(lp, old, [1.0])
    loss, st = grpo_loss(inp, LossConfig(loss_norm="dapo"), Normaliser(1, 2))
    loss.backward()
    g = inp.logprobs.grad.tolist()[0]
    assert g[0] == 0.0 and g[1] == pytest.approx(-1.1 / 2)
    assert float(loss) == pytest.approx(-(1.28 + 1.1) / 2)
    assert st.clipped_high == 1 and st.clipped_low == 0


def test_clip_low_for_negative_advantage_and_asymmetry():
    inp = _inputs([[math.log(0.7), math.log(0.9)]], [[0.0, 0.0]], [-1.0])
    loss, st = grpo_loss(inp, LossConfig(loss_norm="dapo"), Normaliser(1, 2))
    # min(r·A, clip(r)·A) with A < 0 takes the larger magnitude: max(r, 0.8) -> 0.8 for r = 0.7
    assert float(loss) == pytest.approx((0.8 + 0.9) / 2)
    assert st.clipped_low == 1


def test_normalisations_differ_as_documented():
    lp = [[-1.0, -1.0, -1.0, -1.0], [-1.0, 0.0, 0.0, 0.0]]
    mask = [[1, 1, 1, 1], [1, 0, 0, 0]]
    inp = _inputs(lp, lp, [1.0, 1.0], mask=mask)
    norm = Normaliser(sequences=2, tokens=5)
    dr, _ = grpo_loss(inp, LossConfig(loss_norm="dr_grpo", max_completion_tokens=8), norm)
    dapo, _ = grpo_loss(inp, LossConfig(loss_norm="dapo"), norm)
    grpo, _ = grpo_loss(inp, LossConfig(loss_norm="grpo"), norm)
    assert float(dr) == pytest.approx(-5 / 16)
    assert float(dapo) == pytest.approx(-1.0)
    assert float(grpo) == pytest.approx(-1.0)  # each sequence's mean is -1
    with pytest.raises(ValueError):
        grpo_loss(inp, LossConfig(loss_norm="bogus"), norm)


def test_micro_batches_sum_to_the_full_batch_loss():
    torch.manual_seed(0)
    lp = torch.randn(4, 6).tolist()
    old = (torch.tensor(lp) + 0.1 * torch.randn(4, 6)).tolist()
    adv = [1.0, -0.5, 0.3, -2.0]
    mask = (torch.rand(4, 6) > 0.3).float().tolist()
    for norm_name in ("dr_grpo", "dapo", "grpo"):
        cfg = LossConfig(loss_norm=norm_name, max_completion_tokens=6)
        norm = Normaliser(4, float(sum(map(sum, mask))))
        full, _ = grpo_loss(_inputs(lp, old, adv, mask), cfg, norm)
        parts = sum(float(grpo_loss(_inputs(lp[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2]), cfg, norm)[0])
                    for i in (0, 2))
        assert parts == pytest.approx(float(full), rel=1e-5)


def test_importance_weights_truncate_mask_and_sequence():
    old = torch.tensor([[0.0, 0.0, 0.0]])
    rollout = torch.tensor([[math.log(2.0), math.log(0.25), float("nan")]])  # ratios 0.5, 4, none
    mask = torch.ones_like(old)
    w, capped = importance_weights(old, rollout, mask, "token_truncate", cap=2.0)
    assert w.tolist()[0] == pytest.approx([0.5, 2.0, 1.0]) and capped.tolist()[0] == [0.0, 1.0, 0.0]
    w, _ = importance_weights(old, rollout, mask, "token_mask", cap=2.0)
    assert w.tolist()[0] == pytest.approx([0.5, 0.0, 1.0])
    w, _ = importance_weights(old, rollout, mask, "sequence_truncate", cap=3.0)
    assert w.tolist()[0] == pytest.approx([2.0, 2.0, 2.0])  # exp(log 0.5 + log 4) = 2
    w, _ = importance_weights(old, rollout, mask, "none", cap=2.0)
    assert w.tolist()[0] == [1.0, 1.0, 1.0]


def test_importance_weight_scales_the_token_loss():
    inp = _inputs([[0.0]], [[0.0]], [1.0], rollout=[[math.log(2.0)]])  # rollout engine gave 2x the trainer's prob
    loss, st = grpo_loss(inp, LossConfig(loss_norm="dapo", is_mode="token_truncate"), Normaliser(1, 1))
    assert float(loss) == pytest.approx(-0.5)
    assert st.is_weight_sum == pytest.approx(0.5)


def test_kl_term_is_k3_and_zero_at_reference():
    same = _inputs([[-1.0]], [[-1.0]], [0.0], ref=[[-1.0]])
    loss, st = grpo_loss(same, LossConfig(kl_coef=0.1, loss_norm="dapo"), Normaliser(1, 1))
    assert float(loss) == pytest.approx(0.0) and st.kl_sum == pytest.approx(0.0)
    off = _inputs([[-1.0]], [[-1.0]], [0.0], ref=[[-2.0]])
    loss, st = grpo_loss(off, LossConfig(kl_coef=0.1, loss_norm="dapo"), Normaliser(1, 1))
    k3 = math.exp(-1.0) + 1.0 - 1.0
    assert st.kl_sum == pytest.approx(k3) and float(loss) == pytest.approx(0.1 * k3)


def test_sft_loss_floor_counts_prompts_with_two_answers():
    """A prompt with a fast and a slow answer cannot be learnt below ln 2 on the token where they part."""
    import math

    from train.sft import Example, loss_floor

    p1, p2 = [{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]
    two = [Example("A", "cpu", p1, "fast"), Example("A", "cpu_slow", p1, "slow"), Example("B", "cpu", p2, "only")]
    assert loss_floor(two, [100, 50, 80]) == pytest.approx((math.log(2) / 100 + math.log(2) / 50 + 0.0) / 3)
    assert loss_floor(two[2:], [80]) == 0.0


def test_compact_source_keeps_the_code_and_drops_comments():
    import ast

    from agent.parsing import parse_response
    from kernelbench.solutions import find_solution
    from train.sft import compact_source, solution_answer

    src = find_solution("L1/03_silu", "cpu").source
    short = compact_source(src)
    assert len(short) < 0.85 * len(src) and "//" not in short and '"""SiLU' not in short
    assert "return v / (1.0f + exp4(-v));" in short and "#pragma omp parallel for" in short
    ast.parse(short)
    answer = solution_answer(src, compact=True)
    parsed = parse_response(answer)
    assert parsed.ok and parsed.code == short.strip() and parsed.summary.startswith("SiLU")
    # Python's integer division is never taken for a comment
    assert compact_source('"""d"""\nn = 7 // 2  # keep\n') == "n = 7 // 2  # keep\n"
