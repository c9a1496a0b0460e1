"""The pre-training losses sentence-transformers has no class for, one class per module (its `losses/` style).

Each class's docstring names its paper and what it computes, and it has a `citation`; the objectives
(`augsbert.objectives`) name them as "module:Class" strings, imported only by the process that trains.

- `noise_matching`, `masked_lm`, `multi_task`: Noise Matching, masked LM and a main + λ·auxiliary loss (thesis);
- `consert`, `clm_autoencoder`, `mlm_autoencoder`, `contrastive_autoencoder`: seed 000's objectives;
- `train_only_mlp_head`: SimCSE's train-only MLP head;
- `*_simcse` and `simcse_variant` (which class a `pretrain.simcse_variant` means), over `simcse_variant_base`:
  seed 001's (Park) SimCSE variants;
- `entropy_contrastive`, `regularized_contrastive`: seed 002's Regularized Contrastive Learning;
- `common`: the helpers several of them share.
"""
