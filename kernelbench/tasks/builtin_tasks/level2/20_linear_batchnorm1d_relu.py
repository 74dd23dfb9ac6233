"""Linear layer, inference-mode BatchNorm1d (running statistics), then ReLU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """y = relu(batchnorm_eval(x @ W^T + b)).

    The batch norm always uses its running statistics (training=False in forward), whatever mode the
    module is in. Statistics and affine parameters are drawn in __init__ so that they matter.
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)
        with torch.no_grad():
            self.bn.running_mean.copy_(0.1 * torch.randn(out_features))
            self.bn.running_var.copy_(0.5 + torch.rand(out_features))
            self.bn.weight.copy_(1.0 + 0.1 * torch.randn(out_features))
            self.bn.bias.copy_(0.1 * torch.randn(out_features))
        self.bn.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.batch_norm(self.linear(x), self.bn.running_mean, self.bn.running_var, self.bn.weight,
                         self.bn.bias, training=False, eps=self.bn.eps)
        return torch.relu(y)


batch_size = 16384  # gpu size: 2*16384*2048*2048 = 137 GFLOP
in_features = 2048
out_features = 2048

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 256, "in_features": 512, "out_features": 1024}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
