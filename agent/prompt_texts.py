"""Every text the agent is shown, in one place: the system prompt, the device guides and rules, the worked
example of each kernel language, and the templates of a turn (task, earlier attempts, restart), full and
compact. `agent.prompts` assembles them into a turn's messages.

Turn 1 states the task, the solution format, the target device and one worked example. Later turns repeat
that and add, for each earlier attempt, its kernel, the model's own summary of it and the harness's feedback,
then ask the model to restart its reasoning and write a complete new solution. Earlier chains of thought are
never shown again (Kevin-32B, arXiv 2507.11948: re-sending them pushed contexts to 50-100k tokens within a few
turns); the oldest attempts are dropped first when the prompt exceeds its token budget.
"""

SYSTEM = (
    "You are a performance engineer who replaces PyTorch code with hand-written kernels. You care about "
    "two things, in this order: the new module must compute exactly what the original computes, and it "
    "must run faster. You answer with a short summary and one complete Python file."
)

DEVICE_GUIDE = {
    "cuda": (
        "Write CUDA kernels. Put the CUDA source in a Python string and build it with "
        "`torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., cuda_sources=..., functions=[...])`. "
        "Think about memory coalescing, occupancy, shared memory, fusing several operations into one "
        "launch, and avoiding needless global-memory round trips."
    ),
    "cpu": (
        "Write C++ kernels for the CPU. Put the C++ source in a Python string and build it with "
        "`torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., functions=[...])` (no CUDA). "
        "Think about contiguous access, cache blocking, loops the compiler can vectorise, and fusing "
        "several operations into one pass over memory. The harness runs with one thread."
    ),
}


TRITON_GUIDE = (
    "Write Triton kernels: functions decorated with `@triton.jit`, using `triton.language as tl` only inside "
    "them (`tl.program_id`, `tl.arange`, `tl.load`/`tl.store` with masks, `tl.sum`, `tl.max`, `tl.dot`, "
    "`tl.exp`...), launched from `forward` as `kernel[grid](tensors, sizes, BLOCK=...)` with block sizes as "
    "`tl.constexpr` arguments. Import only `torch`, `triton` and `triton.language`. A kernel body may use its "
    "arguments, `tl`, other `@triton.jit` functions and module-level numeric constants, nothing else (no torch, "
    "no Python helpers). Every load and store past the end of a tensor must be masked. fp32 `tl.dot` must pass "
    "`input_precision=\"ieee\"` (the default rounds inputs to TF32, which misses the tolerance)."
)
TRITON_DEVICE_NOTE = {
    "cuda": " Think about block sizes, `num_warps`, coalesced loads, and fusing several operations into one "
            "kernel so that intermediate results never go back to global memory.",
    "cpu": " On this CPU the kernels run under Triton's interpreter (each program of the grid runs as numpy "
           "code): the harness judges correctness only and measures no speedup, so write the kernel you would "
           "run on a GPU, and prefer few, large blocks (for example 65536 elements) when `x.is_cuda` is false. "
           "A `range` inside a kernel needs `tl.constexpr` bounds there.",
}

OP_POLICY_RULES = {
    "strict": (
        "`ModelNew.forward` may not call PyTorch compute operations (torch.matmul, torch.relu, F.conv2d, "
        "arithmetic on tensors, reductions and so on), neither in Python nor from your C++ code. It may "
        "allocate outputs (torch.empty and friends), take views, reshape, read shapes and call your own "
        "compiled functions. All arithmetic happens in your kernels."
    ),
    "partial": (
        "PyTorch operations are allowed in `ModelNew.forward` beside your own kernels, but at least one "
        "custom kernel must run on every call and do real work; put it where the time goes."
    ),
}

FORMAT_RULES = """\
Rules for the solution file:
- Define `class ModelNew(torch.nn.Module)` with the same constructor arguments and the same `forward`
  signature as `Model`, returning the same outputs (shapes, dtypes, values within floating-point tolerance).
- Create parameters in `__init__` in the same order and with the same shapes as `Model`, so that both
  modules built after the same random seed hold equal weights (for example, keep the same nn.Linear layers).
- Compile your kernels inline in the file itself; it must import and run as is, with nothing else on disk.
- No try/except fallbacks to PyTorch, no subclassing of `Model`, no threads or processes, no timers, no files, no
  Python objects in C++ (no Python C API, no `py::object`: `load_inline(functions=...)` writes the bindings).
- No PyTorch internals or vendor libraries in C++ (`at::native`, `at::cpu::mm`, BLAS, oneDNN), however named:
  the built library's imported symbols are checked.
- {op_policy}"""

WEIGHTS_RULE = """\
- Keep `Model`'s parameter and buffer names and shapes (its `state_dict`, listed in the task's docstring): the
  harness loads `Model`'s weights into `ModelNew` before judging it (a mismatch is rejected), as the user's
  trained weights will be loaded later."""
"""Replaces the creation-order rule for a task declaring `KEEP_STATE_DICT` (a submodule `hotspots` extracted)."""

ANSWER_RULES = """\
How to answer:
1. A short summary inside <summary>...</summary>: what your kernel does, what you changed since earlier
   attempts and why you expect it to be correct and fast (a few sentences; it is all you will remember
   of this attempt).
2. Then the complete solution file in one ```python code block, and nothing after it."""

EXAMPLE_PROBLEM = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


size = 1 << 20


def get_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []'''

EXAMPLE_SOLUTION = {
    "triton": '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(src, dst, n, BLOCK: tl.constexpr):
    start = tl.program_id(axis=0) * BLOCK
    idx = start + tl.arange(0, BLOCK)
    inside = idx < n  # the last program may run past the end
    v = tl.load(src + idx, mask=inside, other=0.0)
    tl.store(dst + idx, tl.where(v < 0.0, 0.0, v), mask=inside)  # NaN stays NaN, as in torch.relu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 65536
        relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
        return out''',
    "cpu": '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_cpu(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat, "expects contiguous float32");
    torch::Tensor y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        out[i] = in[i] < 0.0f ? 0.0f : in[i];  // NaN stays NaN, as in torch.relu
    }
    return y;
}
"""

relu_ext = load_inline(name="example_relu_cpu", cpp_sources=cpp_source, functions=["relu_cpu"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_cpu(x.contiguous())''',
    "cuda": '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] < 0.0f ? 0.0f : in[i];  // NaN stays NaN, as in torch.relu
}

torch::Tensor relu_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat);
    torch::Tensor y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"

relu_ext = load_inline(name="example_relu_cuda", cpp_sources=cpp_source, cuda_sources=cuda_source,
                       functions=["relu_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_cuda(x.contiguous())''',
}

TASK_TEMPLATE = """\
Target hardware: {hardware}
{device_guide}

Here is the PyTorch module to speed up:

```python
{task_source}
```

{format_rules}

{answer_rules}

An example. For this problem:

```python
{example_problem}
```

a valid solution is:

```python
{example_solution}
```"""

HISTORY_HEADER = "Your earlier attempts at this task, oldest first, with what the harness found:"
HISTORY_OMITTED = "({n} older attempt(s) left out to fit the context.)"
ATTEMPT_TEMPLATE = """\
### Attempt {number}
Your summary: {summary}

Your code:
```python
{code}
```

Harness result: {status}. {feedback}"""
NO_CODE = "(no usable code in that answer)"
NO_SUMMARY = "(none given)"

COMPACT_TASK_TEMPLATE = """\
Write ModelNew with {kernel_kind} kernels (load_inline) for {hardware}; answer with <summary> and one ```python block.

```python
{task_source}
```"""
COMPACT_KERNEL_KIND = {"cpu": "C++", "cuda": "CUDA"}
COMPACT_TASK_TEMPLATE_TRITON = """\
Write ModelNew with @triton.jit kernels (masked tl.load/tl.store) for {hardware}; answer with <summary> and one ```python block.

```python
{task_source}
```"""
# The model's own summary, its code, then what the harness found: the feedback last, nearest the next answer.
COMPACT_ATTEMPT_TEMPLATE = """\
Attempt {number}, your summary: {summary}
```python
{code}
```
Harness: {feedback}"""
COMPACT_RESTART = "Write a complete new solution: fix what failed, or make a correct one faster."

RESTART = (
    "Restart your reasoning from the task itself: use what the results above show (fix what failed; if "
    "an attempt was correct, look for a faster design), then write a complete new solution file. "
    "Answer as before: a <summary> and one ```python block."
)
