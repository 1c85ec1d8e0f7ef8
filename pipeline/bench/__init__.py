"""Benchmark helpers: ``latency.measure`` times calls, ``latency.summarize`` turns times into stats."""

from pipeline.bench.latency import measure, summarize

__all__ = ["measure", "summarize"]
