"""`nm`: Noise Matching (the thesis): SimCSE with the noised sentence as positive, stop-gradient on the clean one."""

from __future__ import annotations

from .base import Objective
from .tsdae import NoisedOptions

ENTRIES = (Objective("nm", ("clean", "noised"), "cls", True, NoisedOptions,
                     "augsbert.losses.noise_matching:NoiseMatchingLoss"),)
