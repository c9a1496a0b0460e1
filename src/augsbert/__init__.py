"""augsbert: Augmented SBERT workflows (Cross-Encoder / Cross-Bi-Encoder teachers distilled into Bi-Encoders)."""

__version__ = "0.1.0"
