"""Every trainer of the workflow, and what they share.

- `pairs`: pair models (Cross-Encoder, Cross-Bi-Encoder, Bi-Encoder): seed optimisation, best epoch on
  dev Spearman (stages teacher and student);
- `mlm`: masked-LM domain adaptation on target pairs (stage adapt);
- `pretrain`: unsupervised pre-training with an objective of `augsbert.objectives` (losses
  in `augsbert.losses`; `noise`: the deletion noise of its batches; `weight_perturbation`: SAM / AWP) (stages pretrain and
  rcl_entropy);
- `classifier`: the topic-classifier baseline (stage classifier);
- `common`: the resumable work directory, resuming from the newest checkpoint, precision flags.

Batching (`augsbert.training.batching`), several GPUs (`augsbert.training.distributed`) and experiment trackers
(`augsbert.training.tracking`) are shared with the inference stages and live beside this package.
"""
