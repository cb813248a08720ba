"""Chapter 3: gated recurrent networks, the LSTM and the GRU.

- `LSTMCell` is the long short-term memory of Hochreiter and Schmidhuber (1997)
  with the forget gate of Gers, Schmidhuber and Cummins (2000): input gate `i`, forget
  gate `f`, candidate `g` (the paper's `C̃`), output gate `o`,
  `c_t = f ⊙ c_{t-1} + i ⊙ g` and `h_t = o ⊙ tanh(c_t)`. It is the "vanilla" LSTM of
  Greff et al. (2017, arXiv:1503.04069) *without* peephole connections (Gers and
  Schmidhuber, 2000), as in `torch.nn.LSTM`; the four gate blocks are stacked in
  PyTorch's order `i, f, g, o` so weights copy over directly, and it keeps one bias
  where PyTorch keeps two.
- `GRUCell` is the gated recurrent unit of Cho et al. (2014, arXiv:1406.1078),
  `h_t = (1 - z) ⊙ n + z ⊙ h_{t-1}`, in the variant of `torch.nn.GRU` and cuDNN: the
  reset gate is applied *after* the recurrent matmul,
  `n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))`, where the paper computes
  `U (r ⊙ h)`; it keeps both biases, because `r` multiplies `b_hn` but not
  `b_in`.
- `scan` runs a cell along time; `Recurrent` stacks cells into layers and,
  optionally, two directions (Schuster and Paliwal, 1997), with the interface of
  `torch.nn.LSTM` and `torch.nn.GRU` (`batch_first=True`); `from_torch`
  copies their weights, and `n_params` is the closed-form parameter count of all
  three recurrent layers.
- `trace_gates` records every gate at every step, for plots.
- `CharLSTM` is chapter 2's character language model with an LSTM, trained with
  truncated BPTT as in Graves (2013, arXiv:1308.0850); its state is one tensor so that
  `rnn.TruncatedBPTT`, `rnn.stream_nll` and `rnn.sample` work unchanged.

The cells are plain loops, the oracles for the fast `torch.nn` layers that the chapter
trains. Shapes use `b` batch, `t` time, `d` width, `l` layers (times
directions), `v` vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lecturelib.validate import check_ids, check_sizes, check_tensor, describe

KINDS = ("rnn", "gru", "lstm")
# weight blocks per layer: W_x is (n_gates·d, d_in)
N_GATES = {"rnn": 1, "gru": 3, "lstm": 4}


def uniform_parameter(*shape: int, d_model: int) -> nn.Parameter:
    """A parameter of `shape` drawn from `U(-1/√d_model, 1/√d_model)`."""
    bound = 1 / math.sqrt(d_model)  # the initialisation of torch.nn.LSTM and GRU
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


class LSTMCell(nn.Module):
    """LSTM step on `(h, c)`; `W_x`, `W_h`, `b` stack the gate blocks i, f, g, o."""

    def __init__(self, d_in: int, d_model: int):
        super().__init__()
        check_sizes(d_in=d_in, d_model=d_model)
        self.d_in, self.d_model = d_in, d_model
        self.W_x = uniform_parameter(4 * d_model, d_in, d_model=d_model)
        self.W_h = uniform_parameter(4 * d_model, d_model, d_model=d_model)
        self.b = uniform_parameter(4 * d_model, d_model=d_model)

    def gates(self, x_t: torch.Tensor, h_prev: torch.Tensor) -> dict[str, torch.Tensor]:
        """The gates `i, f, o` and the candidate `g`."""
        a = x_t @ self.W_x.T + h_prev @ self.W_h.T + self.b  # (b, 4·d_model)
        a_i, a_f, a_g, a_o = a.chunk(4, dim=-1)  # PyTorch's order
        return {
            "i": torch.sigmoid(a_i),
            "f": torch.sigmoid(a_f),
            "g": torch.tanh(a_g),
            "o": torch.sigmoid(a_o),
        }

    def forward(self, x_t: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        h_prev, c_prev = state
        gate = self.gates(x_t, h_prev)
        c = gate["f"] * c_prev + gate["i"] * gate["g"]  # the additive cell path
        h = gate["o"] * torch.tanh(c)
        return h, c


class GRUCell(nn.Module):
    """GRU step on `(h,)`; `r` after the matmul as in torch.nn.GRU; blocks r, z, n."""

    def __init__(self, d_in: int, d_model: int):
        super().__init__()
        check_sizes(d_in=d_in, d_model=d_model)
        self.d_in, self.d_model = d_in, d_model
        self.W_x = uniform_parameter(3 * d_model, d_in, d_model=d_model)
        self.W_h = uniform_parameter(3 * d_model, d_model, d_model=d_model)
        self.b_x = uniform_parameter(3 * d_model, d_model=d_model)
        self.b_h = uniform_parameter(3 * d_model, d_model=d_model)

    def gates(self, x_t: torch.Tensor, h_prev: torch.Tensor) -> dict[str, torch.Tensor]:
        """The gates `r, z` and the candidate `n`."""
        x_r, x_z, x_n = (x_t @ self.W_x.T + self.b_x).chunk(3, dim=-1)
        h_r, h_z, h_n = (h_prev @ self.W_h.T + self.b_h).chunk(3, dim=-1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)  # the reset gate acts after the matmul
        return {"r": r, "z": z, "n": n}

    def forward(self, x_t: torch.Tensor, state: tuple[torch.Tensor]):
        (h_prev,) = state
        gate = self.gates(x_t, h_prev)
        return ((1 - gate["z"]) * gate["n"] + gate["z"] * h_prev,)


CELLS = {"lstm": LSTMCell, "gru": GRUCell}


def check_cell_input(cell: nn.Module, x: torch.Tensor, state) -> None:
    """The arguments of `scan` and `trace_gates`."""
    if not isinstance(cell, (LSTMCell, GRUCell)):
        kind = f"{type(cell).__module__}.{type(cell).__qualname__}"
        raise TypeError(
            f"cell must be a lecturelib.recurrence.lstm_gru.LSTMCell or GRUCell "
            f"(torch.nn cells are not accepted); got {kind}"
        )
    check_tensor(x, "x", f"(b, t, d_in={cell.d_in})")
    if x.dim() != 3 or x.shape[-1] != cell.d_in:
        raise ValueError(
            f"x must be (b, t, d_in={cell.d_in}); got shape {tuple(x.shape)}"
        )
    n_state = 2 if isinstance(cell, LSTMCell) else 1
    expected = (x.shape[0], cell.d_model)
    if state is not None and (
        not isinstance(state, (tuple, list))
        or len(state) != n_state
        or any(
            not isinstance(s, torch.Tensor) or tuple(s.shape) != expected for s in state
        )
    ):
        shapes = (
            [
                tuple(s.shape) if isinstance(s, torch.Tensor) else describe(s)
                for s in state
            ]
            if isinstance(state, (tuple, list))
            else describe(state)
        )
        raise ValueError(
            f"state must be {n_state} tensor(s) of shape "
            f"(b, d_model) = {expected}; got {shapes}"
        )


def zero_state(cell: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    zeros = x.new_zeros(x.shape[0], cell.d_model)
    return (zeros, zeros) if isinstance(cell, LSTMCell) else (zeros,)


def scan(
    cell: nn.Module, x: torch.Tensor, state: tuple[torch.Tensor, ...] | None = None
):
    """Run `cell` over time from `state` (None: zeros); returns h (b, t, d), state."""
    check_cell_input(cell, x, state)
    state = zero_state(cell, x) if state is None else state
    outputs = []
    for step in range(x.shape[1]):
        state = cell(x[:, step], state)
        outputs.append(state[0])
    return torch.stack(outputs, dim=1), state


def check_recurrent(kind, d_in, d_model, n_layers) -> None:
    """The arguments of `Recurrent`."""
    if kind not in CELLS:
        raise ValueError(f"kind must be one of {sorted(CELLS)}; got {kind!r}")
    check_sizes(d_in=d_in, d_model=d_model, n_layers=n_layers)


def check_recurrent_input(model: "Recurrent", x, state) -> None:
    """The input and the PyTorch-style state given to `Recurrent.forward`."""
    check_tensor(x, "x", "(b, t, d_in)")
    if x.dim() != 3:
        raise ValueError(f"x must be (b, t, d_in); got shape {tuple(x.shape)}")
    if state is None:
        return
    parts = state if model.kind == "lstm" else (state,)
    expected = (len(model.cells), x.shape[0], model.d_model)
    n_parts = 2 if model.kind == "lstm" else 1
    if (
        not isinstance(parts, (tuple, list))
        or len(parts) != n_parts
        or any(
            not isinstance(p, torch.Tensor) or tuple(p.shape) != expected for p in parts
        )
    ):
        what = "(h0, c0), each" if model.kind == "lstm" else "h0"
        got = (
            [
                tuple(p.shape) if isinstance(p, torch.Tensor) else describe(p)
                for p in parts
            ]
            if isinstance(parts, (tuple, list))
            else describe(parts)
        )
        raise ValueError(
            f"state must be {what} (l·dirs, b, d_model) = {expected}; got {got}"
        )


class Recurrent(nn.Module):
    """LSTM or GRU layers, one or two directions, like torch.nn.LSTM/GRU, batch first.
    Shapes: x (b, t, d_in), state parts (l·dirs, b, d) -> (b, t, dirs·d), state."""

    def __init__(
        self, kind: str, d_in: int, d_model: int, n_layers=1, bidirectional=False
    ):
        super().__init__()
        check_recurrent(kind, d_in, d_model, n_layers)
        self.kind, self.d_model, self.n_layers = kind, d_model, n_layers
        self.dirs = 2 if bidirectional else 1
        # each layer's input width
        widths = [d_in] + [self.dirs * d_model] * (n_layers - 1)
        self.cells = nn.ModuleList(
            [CELLS[kind](w, d_model) for w in widths for _ in range(self.dirs)]
        )

    def forward(self, x: torch.Tensor, state=None):
        check_recurrent_input(self, x, state)
        if state is not None:  # one (h0_k, c0_k) or (h0_k,) per cell k
            state = list(zip(*(state if self.kind == "lstm" else (state,))))
        inputs, last = x, []
        for layer in range(self.n_layers):
            outputs = []
            for direction in range(self.dirs):
                k = layer * self.dirs + direction
                # backward: read reversed, then realign in time
                seq = inputs if direction == 0 else inputs.flip(1)
                out, s = scan(self.cells[k], seq, None if state is None else state[k])
                outputs.append(out if direction == 0 else out.flip(1))
                last.append(s)
            inputs = torch.cat(outputs, dim=-1)  # (b, t, dirs·d_model)
        h_n = torch.stack([s[0] for s in last])  # (l·dirs, b, d_model)
        if self.kind == "lstm":
            return inputs, (h_n, torch.stack([s[1] for s in last]))
        return inputs, h_n


def check_torch_recurrent(module) -> None:
    """`from_torch` copies a batch_first `nn.LSTM` or `nn.GRU` with biases
    and no projection."""
    if not isinstance(module, (nn.LSTM, nn.GRU)):
        raise TypeError(
            f"expected a torch.nn.LSTM or torch.nn.GRU; got {type(module).__name__}"
        )
    if not module.batch_first or not module.bias or getattr(module, "proj_size", 0):
        raise ValueError(
            "only batch_first modules with biases and no projection "
            f"can be copied; got {module}"
        )


@torch.no_grad()
def from_torch(module: nn.LSTM | nn.GRU) -> Recurrent:
    """A `Recurrent` with a torch.nn.LSTM's or GRU's weights (LSTM biases summed)."""
    check_torch_recurrent(module)
    kind = "lstm" if isinstance(module, nn.LSTM) else "gru"
    ours = Recurrent(
        kind,
        module.input_size,
        module.hidden_size,
        module.num_layers,
        module.bidirectional,
    )
    for k, cell in enumerate(ours.cells):
        name = f"l{k // ours.dirs}" + ("_reverse" if k % ours.dirs else "")
        cell.W_x.copy_(getattr(module, f"weight_ih_{name}"))
        cell.W_h.copy_(getattr(module, f"weight_hh_{name}"))
        b_x = getattr(module, f"bias_ih_{name}")
        b_h = getattr(module, f"bias_hh_{name}")
        if kind == "lstm":
            cell.b.copy_(b_x + b_h)
        else:
            cell.b_x.copy_(b_x)
            cell.b_h.copy_(b_h)
    return ours.to(module.weight_ih_l0.device)


def check_n_params(kind, d_in, d_model, n_layers) -> None:
    """The arguments of `n_params`."""
    if kind not in N_GATES:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    if not all(isinstance(v, int) and v >= 1 for v in (d_in, d_model, n_layers)):
        raise ValueError(
            f"d_in, d_model and n_layers must be positive ints; "
            f"got {d_in!r}, {d_model!r}, {n_layers!r}"
        )


def n_params(
    kind: str, d_in: int, d_model: int, n_layers: int = 1, bidirectional: bool = False
) -> int:
    """Parameters of torch.nn.RNN/GRU/LSTM (`kind`) of these sizes, two biases each."""
    check_n_params(kind, d_in, d_model, n_layers)
    dirs, G, d = 2 if bidirectional else 1, N_GATES[kind], d_model
    first = G * (d * d_in + d * d + 2 * d)  # W_x, W_h and PyTorch's two biases
    upper = G * (d * dirs * d + d * d + 2 * d)
    return dirs * (first + (n_layers - 1) * upper)


@torch.no_grad()
def trace_gates(cell: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Run `cell` from a zero state, recording every gate and the state at every step.
    Shapes: x (b, t, d_in) -> dict of (b, t, d_model): LSTM i f g o c h, GRU r z n h."""
    check_cell_input(cell, x, None)
    state = zero_state(cell, x)
    record: dict[str, list[torch.Tensor]] = {}
    for step in range(x.shape[1]):
        gates = cell.gates(x[:, step], state[0])
        state = cell(x[:, step], state)
        gates.update(h=state[0], **({"c": state[1]} if len(state) == 2 else {}))
        for name, value in gates.items():
            record.setdefault(name, []).append(value)
    return {name: torch.stack(values, dim=1) for name, values in record.items()}


def check_char_lstm_input(model: "CharLSTM", x: torch.Tensor, state) -> None:
    """The ids and the stacked `(h, c)` state given to `CharLSTM.forward`."""
    check_ids(x, "x", dims=2, vocab_size=model.embed.num_embeddings)
    expected = (2, model.lstm.num_layers, x.shape[0], model.lstm.hidden_size)
    if state is not None and (
        not isinstance(state, torch.Tensor) or tuple(state.shape) != expected
    ):
        raise ValueError(
            f"state must be (h, c) stacked, (2, l, b, d_model) = "
            f"{expected}; got {describe(state)}"
        )


class CharLSTM(nn.Module):
    """Embedding → nn.LSTM → readout; the state `(h, c)` stacked: (2, l, b, d_model)."""

    def __init__(self, vocab_size: int, d_emb: int, d_model: int, n_layers: int = 1):
        super().__init__()
        check_sizes(
            vocab_size=vocab_size, d_emb=d_emb, d_model=d_model, n_layers=n_layers
        )
        self.embed = nn.Embedding(vocab_size, d_emb)
        self.lstm = nn.LSTM(d_emb, d_model, n_layers, batch_first=True)
        self.readout = nn.Linear(d_model, vocab_size)

    def forward(self, x: torch.Tensor, state: torch.Tensor | None = None):
        check_char_lstm_input(self, x, state)
        hc = None if state is None else (state[0], state[1])
        # states (b, t, d_model); h and c (l, b, d_model) each
        states, (h, c) = self.lstm(self.embed(x), hc)
        return self.readout(states), torch.stack([h, c])
