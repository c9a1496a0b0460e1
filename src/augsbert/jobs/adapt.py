"""Stage `adapt`: masked-LM domain adaptation of the base model on target pairs (CBE layout)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from ..training.mlm import adapt, candidate_pairs, epoch_steps, evaluate_mlm, mlm_pairs, split_held_out
from ..store.artifacts import artifact_dir, write_json
from ..errors import ConfigError
from ..models import resolve_device
from ..models.mlm import masked_lm_from
from ..params import read_params
from ..stages.adapt import AdaptParams
from .common import checkpoint_dir, model_path, precision
from ..data.pool import target_pool
from ..data.prompts import prompt_pairs, topic_map

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = read_params(AdaptParams, spec)
    pool, _, removed = target_pool(spec["inputs"]["data"], params.pool, params.exclude_eval_sentences)
    if params.pairs == "candidates":  # thesis 4.3.1: the pairs the teacher labels are the pairs MLM trains on
        pairs = candidate_pairs(Path(spec["inputs"]["candidates"]) / "candidates.parquet")
    else:
        pairs = mlm_pairs(pool, params.seed)
    if params.topic_prompt:  # thesis 4.4.3: [CLS] t1 ¥ a [SEP] [CLS] t2 ¥ b [SEP]
        pairs = prompt_pairs(pairs, params.topic_prompt, topic_map(spec["inputs"]["data"]))
    train, held_out = split_held_out(pairs, params.held_out, params.seed)
    if params.epochs is not None:  # adapt.epochs: passes over the training pairs (thesis 5.6.1: 5 epochs)
        params = replace(params, max_steps=epoch_steps(len(train), params.batch_size, params.epochs))
    elif params.max_steps is None:
        raise ConfigError("spec params: adapt needs max_steps or epochs (adapt.max_steps / adapt.epochs)")
    work = checkpoint_dir(out)
    with artifact_dir(out, spec, force, checkpoints=work) as tmp:
        device = resolve_device(device)
        base = model_path(params, params.model)
        log.info("MLM adaptation of %s on %d pairs from %d target sentences (%d held out)", params.model,
                 len(train), len(pool), len(held_out))
        model, tokenizer, pair_tokenizer, metrics = adapt(base, train, params, work, device, precision())
        delimiter_id = metrics.pop("topic_delimiter_id")
        after = evaluate_mlm(model, pair_tokenizer, held_out, params.mask_probability, delimiter_id=delimiter_id)
        base_model = masked_lm_from(base)
        if len(tokenizer) > base_model.get_input_embeddings().num_embeddings:  # an added topic delimiter
            base_model.resize_token_embeddings(len(tokenizer))
        before = evaluate_mlm(base_model.to(device), pair_tokenizer, held_out, params.mask_probability,
                              delimiter_id=delimiter_id)
        log.info("held-out MLM loss %.3f -> %.3f, masked-token accuracy %.3f -> %.3f",
                 before["loss"], after["loss"], before["accuracy"], after["accuracy"])
        model.save_pretrained(str(tmp / "model"))
        tokenizer.save_pretrained(str(tmp / "model"))
        pairs.to_parquet(tmp / "pairs.parquet", index=False)
        metrics = {"device": device, "pair_source": params.pairs, "pool_sentences": len(pool),
                   "eval_sentences_removed_from_pool": removed,
                   "pairs": len(pairs), "train_pairs": len(train), "held_out_pairs": len(held_out),
                   "held_out": {"base": before, "adapted": after}, **metrics}
        write_json(tmp / "metrics.json", metrics)
    return metrics
