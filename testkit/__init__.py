"""Test doubles that tests and benchmarks share (a fake OpenAI-compatible server); the product never imports them."""
