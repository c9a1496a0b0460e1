"""One thin entry per stage (`<stage>.py`, `run`: a planned spec in, one artifact out) and their shared plumbing."""
