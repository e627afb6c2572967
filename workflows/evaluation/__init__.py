"""Evaluation harness: metrics and runs that score margin's rewrites and feedback against references."""
