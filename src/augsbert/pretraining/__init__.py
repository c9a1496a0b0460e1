"""Unsupervised pre-training of a sentence encoder (SimCSE, CT, TSDAE, Noise Matching, multi-task).

- `noise`: the deletion noise T(x) of TSDAE and Noise Matching, applied per batch by a collator;
- `losses`: the objectives that sentence-transformers has no class for (one class per objective);
- `variants`: seed 001's (Park) SimCSE variants (`pretrain.simcse_variant`) and the SAM / AWP trainer hook;
"""
