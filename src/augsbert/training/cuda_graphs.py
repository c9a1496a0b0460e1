"""Training steps at fixed shapes, replayed as CUDA graphs (`cuda_graphs: auto`, the pair trainers on CUDA).

A MiniLM step is about a millisecond of an H100's arithmetic, but a few hundred kernel launches by one
host thread; the GPU waits on Python (issue 37). A CUDA graph records a step's kernels once and replays
them in one launch, which needs the same shapes and the same memory every time. So, on CUDA with
`cuda_graphs: auto`:

- **buckets:** training batches are padded to a few fixed widths (`augsbert.models.padding.bucket_width`, the
  trainers' collators pad to it when `buckets` gives `max_length`: multiples of 8 up to
  64 tokens, of 16 up to 128, of 32 up to 256, then of 64, never past `max_length`), so there are at
  most about twenty shapes per trainer. Padding is masked everywhere; what changes is float summation
  order and the layout of dropout masks;
- **one static step per bucket:** `TensorLoss` is the loss of a batch given as a flat tuple of tensors
  (a plain module, the same computation as the trainer's loss; the Bi-Encoder encodes all its columns
  in one forward, `embed_columns(..., separate_first=False)`); `GraphedLoss` captures its forward and
  backward once per shape with `torch.cuda.make_graphed_callables` and replays them. The optimizer
  step stays the trainer's (fused AdamW: one kernel group), as do the schedule and clipping.
- **fallback:** if capturing fails on a user's GPU (an operation that waits for the host, an
  unsupported module), training goes on eagerly with one warning naming the reason; it never stops
  and never mixes replays with the failed capture.

Why `make_graphed_callables` and not `torch.compile(mode="reduce-overhead")`: it graphs exactly the
module it is given, leaves the trainers' optimizer, checkpoints and resume untouched (the gradients it
replays land in `.grad` as eager ones do), costs no compile time (issue 25 measured 62 s of
compiling), and a failure is one exception at capture, which the fallback catches.

On CPU (and with `cuda_graphs: off`) nothing here runs: the trainers compute what they computed before.
Tests run `TensorLoss` on CPU against the trainers' own loss and simulate a failed capture.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

import torch

from ..models.device import CUDA_GRAPHS_ENV  # auto | off (the Snakefile sets it from the config)
from . import distributed
from ..errors import ConfigError

log = logging.getLogger(__name__)

MODES = ("auto", "off")
MAX_GRAPHS = 64  # shapes captured per trainer; a batch of yet another shape runs eagerly


def mode() -> str:
    value = os.environ.get(CUDA_GRAPHS_ENV, "off").strip() or "off"  # off until measured on a GPU
    if value not in MODES:
        raise ConfigError(f"${CUDA_GRAPHS_ENV} is {value!r}; cuda_graphs is one of {', '.join(MODES)}")
    return value


# Not safe with gradient accumulation: autograd may alias a graph's static gradient output into `.grad`
# instead of adding it, so two micro-batches of one shape would leave only the second. Every trainer here
# steps on each batch (gradient_accumulation_steps 1); a trainer that accumulates must stay eager.
def active(device, torch_compile: bool = False) -> bool:
    """Whether a trainer on `device` takes the graph path: CUDA with `cuda_graphs: auto`, in one process, the model
    not compiled. Several processes (`gpus` > 1) stay eager: their gradients are averaged by DDP's hooks during
    the backward, which a graph of the bare model would skip. A compiled model has graphs of its own making."""
    return torch.device(device).type == "cuda" and mode() == "auto" and distributed.world_size() == 1 \
        and not torch_compile


def buckets(device, max_length: int, torch_compile: bool = False) -> int | None:
    """The trainers' bucket limit on `device`: `max_length` on the graph path, None (exact widths) elsewhere."""
    return max_length if active(device, torch_compile) else None


def _flatten(features: Sequence[dict], labels) -> tuple[tuple[torch.Tensor, ...], tuple]:
    """A batch's tensors in a fixed order and its layout: per column the keys (tensors) and constants."""
    tensors, layout = [], []
    for columns in features:
        keys = tuple(k for k, v in columns.items() if isinstance(v, torch.Tensor))
        constants = tuple((k, v) for k, v in columns.items() if not isinstance(v, torch.Tensor))
        tensors.extend(columns[k] for k in keys)
        layout.append((keys, constants))
    has_labels = isinstance(labels, torch.Tensor)
    if has_labels:
        tensors.append(labels)
    return tuple(tensors), (tuple(layout), has_labels)


def _signature(tensors: Sequence[torch.Tensor], layout) -> tuple:
    return layout, tuple((tuple(t.shape), t.dtype, t.device) for t in tensors)


class TensorLoss(torch.nn.Module):
    """A sentence-transformers loss as a function of a flat tuple of tensors (what a CUDA graph replays).

    `forward(*tensors)` rebuilds the columns' feature dicts of `layout`, encodes every column in one
    forward (the columns padded to one width, concatenated, encoded, split; `one_forward=False`: one
    forward per column, as the library's losses do for two columns) and returns the loss's
    `compute_loss_from_embeddings`.
    """

    def __init__(self, loss: torch.nn.Module, layout, one_forward: bool = True):
        super().__init__()
        self.loss = loss
        self.layout, self.has_labels = layout
        self.one_forward = one_forward

    @property
    def trains(self) -> bool:
        return self.loss.model.training

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        from sentence_transformers.base.losses.merged_forward import embed_columns

        features, at = [], 0
        for keys, constants in self.layout:
            features.append({**dict(zip(keys, tensors[at : at + len(keys)])), **dict(constants)})
            at += len(keys)
        labels = tensors[at] if self.has_labels else None
        embeddings = embed_columns(self.loss.model, features, separate_first=not self.one_forward)
        return self.loss.compute_loss_from_embeddings(embeddings, labels)


class ModelLoss(torch.nn.Module):
    """A model that returns its loss (`model(**batch)["loss"]`, the Cross-Bi-Encoder) as a function of a
    flat tuple of tensors; `layout` names them."""

    def __init__(self, model: torch.nn.Module, layout):
        super().__init__()
        self.model = model
        self.keys = layout

    @property
    def trains(self) -> bool:
        return self.model.training

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.keys, tensors)))["loss"]


def capture(module: torch.nn.Module, sample: tuple[torch.Tensor, ...], state: dict) -> Callable:
    """`module`'s forward and backward on tensors shaped like `sample`, captured as CUDA graphs.

    Mixed precision: the trainers' autocast is entered inside the model's forward (accelerate wraps it),
    so its weight cache is emptied as each forward ends and a captured forward casts the weights it
    reads afresh on every replay. An autocast already open around the step would keep the casts of the
    warm-up passes, made before the weights' next update, in the graph: that case is refused (and the
    step runs eagerly) rather than replayed with stale weights."""
    if torch.is_autocast_enabled("cuda"):
        raise RuntimeError("an autocast context is open around the training step; its weight cache cannot be "
                           "captured")
    sample = tuple(t.clone() for t in sample)
    if "pool" not in state:  # one memory pool for all shapes: the graphs never run at once
        state["pool"] = torch.cuda.graph_pool_handle()
    torch.clear_autocast_cache()
    return torch.cuda.make_graphed_callables(module, sample, num_warmup_iters=3, allow_unused_input=True,
                                             pool=state["pool"])  # unused: e.g. BERT's pooler


def on_cuda(tensors: Sequence[torch.Tensor]) -> bool:
    return all(t.device.type == "cuda" for t in tensors)


class GraphedLoss:
    """The static step of one trainer: per batch shape, a captured graph of `make(layout)`'s forward and
    backward, replayed for every later batch of that shape; eager where capture does not apply.

    `capture_fn` is `capture` unless given (tests pass stand-ins). A capture that raises switches this trainer to
    eager for the rest of the run, with one warning; eager is then exactly the module `make` builds.
    """

    def __init__(self, make: Callable[[object], torch.nn.Module], capture_fn: Callable | None = None,
                 max_graphs: int = MAX_GRAPHS):
        self.make = make
        self.capture_fn = capture_fn or capture
        self.max_graphs = max_graphs
        self.modules: dict[object, torch.nn.Module] = {}  # layout -> the eager module
        self.graphs: dict[tuple, Callable] = {}  # shape signature -> the replayable module
        self.failed: str | None = None
        self.state: dict = {}  # what capture_fn keeps between captures (the memory pool)
        self.replayable = on_cuda  # which batches are captured (tests stand in for CUDA)

    def __call__(self, tensors: tuple[torch.Tensor, ...], layout) -> torch.Tensor:
        try:
            eager = self.modules.get(layout) or self.modules.setdefault(layout, self.make(layout))
        except TypeError:  # a constant of the batch that cannot be a key: this batch runs eagerly
            return self.make(layout)(*tensors)
        if self.failed or not torch.is_grad_enabled() or not eager.trains or not self.replayable(tensors):
            return eager(*tensors)
        key = _signature(tensors, layout)
        graphed = self.graphs.get(key)
        if graphed is None:
            if len(self.graphs) >= self.max_graphs:
                return eager(*tensors)
            try:
                # a module of its own per shape: capturing replaces the forward of the module it is given
                graphed = self.graphs[key] = self.capture_fn(self.make(layout), tensors, self.state)
            except Exception as err:  # any failure to capture: train on eagerly, never stop
                self.failed = f"{type(err).__name__}: {err}"
                self.graphs.clear()
                log.warning("cuda_graphs: capturing the training step failed (%s); this job trains eagerly "
                            "(set cuda_graphs: off to skip the attempt)", self.failed)
                return eager(*tensors)
            log.info("cuda_graphs: captured the training step for batches of shape %s",
                     [tuple(t.shape) for t in tensors])
        return graphed(*tensors)


def one_width(features: list[dict]) -> list[dict]:
    """The columns' token tensors padded to the widest column's width (zeros, masked: what the library's merged
    forward pads with), so that a batch's shape is one bucket, not one per column: fewer graphs."""
    widths = [f["input_ids"].shape[1] for f in features if isinstance(f.get("input_ids"), torch.Tensor)]
    if len(widths) != len(features) or len(set(widths)) < 2:
        return features
    width = max(widths)
    return [{k: torch.nn.functional.pad(v, (0, width - v.shape[1]))
             if isinstance(v, torch.Tensor) and v.ndim == 2 and not v.is_floating_point() else v
             for k, v in f.items()} for f in features]


def static_sentence_loss(loss: torch.nn.Module, capture_fn: Callable | None = None) -> torch.nn.Module:
    """`loss` (a sentence-transformers loss with `compute_loss_from_embeddings`) computing each batch
    through `GraphedLoss`: one forward for all columns, replayed per bucket on CUDA. Returns `loss`
    itself, its forward replaced (its class, name and config stay the library's, for the model card)."""
    static = GraphedLoss(lambda layout: TensorLoss(loss, layout), capture_fn)

    def forward(sentence_features, labels):
        tensors, layout = _flatten(one_width(list(sentence_features)), labels)
        return static(tensors, layout)

    loss.forward = forward
    loss.static_step = static
    return loss


def graphed_compute_loss(trainer_class):
    """`trainer_class` (a Hugging Face Trainer of a model that returns its loss) whose loss goes through
    `GraphedLoss` when the trainer is given `static_step=True`."""

    class GraphedTrainer(trainer_class):
        def __init__(self, *args, static_step: bool = False, capture_fn: Callable | None = None, **kwargs):
            super().__init__(*args, **kwargs)
            self.static_step = GraphedLoss(lambda keys: ModelLoss(self.model, keys), capture_fn) \
                if static_step else None

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if self.static_step is None or return_outputs:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            keys = tuple(k for k, v in inputs.items() if isinstance(v, torch.Tensor))
            return self.static_step(tuple(inputs[k] for k in keys), keys)

    GraphedTrainer.__name__ = GraphedTrainer.__qualname__ = trainer_class.__name__
    return GraphedTrainer
