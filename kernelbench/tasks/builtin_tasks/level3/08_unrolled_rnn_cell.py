"""Elman RNN cell (tanh) unrolled over the time steps with explicit Linear layers, then a linear readout."""
import torch
import torch.nn as nn

OP_POLICY = "partial"


class Model(nn.Module):
    """h_t = tanh(W_x x_t + W_h h_{t-1} + b), h_0 = 0; returns readout(h_T) for x of shape (seq_len, batch, in)."""

    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.in_proj = nn.Linear(input_size, hidden_size)
        self.rec_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.readout = nn.Linear(hidden_size, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[1], self.hidden_size)
        for t in range(x.shape[0]):
            h = torch.tanh(self.in_proj(x[t]) + self.rec_proj(h))
        return self.readout(h)


seq_len = 32        # gpu size: 32 steps x 2*512*(1024+2048)*2048 FLOP = 206 GFLOP, 32 dependent steps
batch_size = 512
input_size = 1024
hidden_size = 2048
output_size = 256

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"seq_len": 8, "batch_size": 32, "input_size": 128, "hidden_size": 256, "output_size": 32}


def get_inputs():
    return [torch.randn(seq_len, batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
