"""Test doubles and tools that tests and benchmarks share (a fake OpenAI-compatible server, headless Chromium); the product never imports them."""
