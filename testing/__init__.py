"""Test doubles for margin's tests and benchmarks: a scripted OpenAI-compatible endpoint and scripted agents."""
