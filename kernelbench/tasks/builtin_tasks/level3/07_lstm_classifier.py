"""Two-layer LSTM over a sequence (nn.LSTM), then a linear head on the last time step's hidden state."""
import torch
import torch.nn as nn

OP_POLICY = "partial"


class Model(nn.Module):
    """logits = head(LSTM(x)[:, -1]), zero initial state, batch-first input (batch, seq_len, input_size)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, num_classes: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True)
        # Wider weights than nn.LSTM's default U(+-1/sqrt(hidden)), whose hidden states stay near 0.05 on
        # unit inputs: logits that small would come within an absolute tolerance of a zero result.
        with torch.no_grad():
            for name, p in self.lstm.named_parameters():
                if name.startswith("weight"):
                    p.copy_(torch.randn_like(p) * (2.0 / hidden_size ** 0.5))
        self.head = nn.Linear(hidden_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


batch_size = 64     # gpu size: 256 steps x 2 layers, 2*64*2048*(768 or 1024) FLOP per layer-step, ~110 GFLOP
seq_len = 256
input_size = 256
hidden_size = 512
num_layers = 2
num_classes = 10

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 4, "seq_len": 32, "input_size": 64, "hidden_size": 128}


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, num_classes]
