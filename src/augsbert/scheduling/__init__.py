"""Scheduling: job sizes for a scheduler, GPUs shared between jobs, SLURM, warm starts and progress lines."""
